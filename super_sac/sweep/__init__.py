"""Sweeps over configs x envs x seeds: the grid of trial folders, its manifest, and the
statistics of the reports (IQM, stratified bootstrap intervals, area under the curve)."""
