"""The course wing: what the chapters use and a researcher does not need.

The core library (``kvattn`` outside this package: the configuration, the layers and models,
training, checkpoints, data, statistics and diagnostics) imports nothing from here, so that
``import kvattn`` loads neither plotly nor ipywidgets (``tests/test_layers.py`` checks both).
Here are the chapters' companions:

* :mod:`kvattn.course.plots` — the shared plotly figures and the figure check;
* :mod:`kvattn.course.explorers` — one module per explorer, its static and live faces;
* ``kvattn.course.exercises`` — the chapters' exercises and their checker;
* :mod:`kvattn.course.contrast_report` — chapter 5's verdicts and tables;
* :mod:`kvattn.course.collapse_report`, :mod:`kvattn.course.hunt_report` and
  :mod:`kvattn.course.depth_report` — chapter 11's findings, hunt and depth experiment;
* :mod:`kvattn.course.records` — the experiment-records appendix;
* ``kvattn.course.book`` — a MyST-NB plugin for the book build.

Importing this package imports none of them; import the one a chapter needs
(``from kvattn.course import plots``).
"""
