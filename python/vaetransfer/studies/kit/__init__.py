"""The study kit: what two or more studies use, and what a study is declared with.

* :mod:`.declarations` — ``Study``, ``Stage``, ``Finding``, ``Verdict``, ``Diagnosis``, ``Job``,
  ``RunResult`` and the names of an output directory's files (the runner that executes them is
  :mod:`vaetransfer.studies.pipeline`);
* :mod:`.steps` — resumable analysis steps;
* :mod:`.trained` — did the models a finding rests on train (one check, one JSON shape);
* :mod:`.stats` — summary statistics and the interval settings of a config;
* :mod:`.markdown` — one number and table format for every report;
* :mod:`.figures` — drawing and saving a study's figures;
* :mod:`.t5_pretraining` — pretraining a small T5 as a reusable step;
* :mod:`.t5_vae_metrics` — the T5-VAE measurements (mutual information, active units, probes).

The kit imports no study and nothing of the runner; a study imports the kit and the library only.
"""
