"""The fine-tune similarity study's configuration: the compared layers, the domains it can use, the
fine-tuning tasks, :class:`Config` and its presets.

**Why ``medium`` has its sizes** (measured at ``small`` and in single-seed trials, 32 filters):

* 70 pretraining epochs: fully random labels on 5,000 rows (the largest memorised set) reach a
  training accuracy of 0.99 by epoch ~56 and ~1.0 from ~61 (``small``'s 25 epochs: ~0.65), on 500
  and 1,500 rows ~1.0 by ~26 and ~31, the true labels by ~30: every from-scratch group compared by
  ``less_structure_less_early_change`` and ``memorisation_uses_early_layers_with_more_data`` has
  memorised its labels (memorisation is a late-training effect).
* memorisation sizes 250, 500, 1,000, 2,500 (and ``pretrain_n`` 5,000): a 20× range as the paper's
  1k–20k, 5 sizes for the rank correlation over N (``small``: 3).
* 60 fine-tuning epochs: fine-tuning the pre-trained network on fully random labels (5,000 rows)
  fits them at the from-scratch pace (training accuracy 0.85 at epoch 36 on the same domain, 0.96
  on street_digits; ``small``'s 8: ~0.25): ``random_closer_to_init`` and
  ``random_labels_change_early_layers`` then compare the memorised end state the paper describes
  (the layer-mean CKA to init and to the pre-trained network still move between epochs 30 and 40).
* 5 seeds (the paper's): the early layers' final CKA to init differs by ~0.01–0.02 between
  neighbouring d or N (block1 0.885 / 0.865 / 0.880 at N = 500 / 1,500 / 5,000 for one seed),
  within one seed's noise.

Its cost, measured at 1 thread (CPU seconds, on a machine loaded by other jobs): an epoch from
scratch 2.2 s on 5,000 rows, 1.3 s on 1,500, 1.0 s on 500 (each epoch also tests 2,000 rows and
measures CKA on 500); a fine-tuning epoch on 5,000 rows 2.3–2.5 s; the analysis's cross-seed
intervals 24 s a task and 13 s a from-scratch group at 5 seeds. 45 from-scratch runs (9 groups × 5
seeds) ~5,600 s and 40 fine-tuning runs (8 tasks × 5 seeds) ~5,500 s: ~95 min on 2 workers (~110
min if a step costs the 14.7 ms of a bare 200-step timing rather than the 8.4 ms these runs imply),
plus ~6 min of analysis.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import data
from ..._checks import value_error
from ..kit.stats import check_interval_fields

#: The layers compared: the four block outputs and the logits (the public code's choice).
LAYERS = ("block1", "block2", "block3", "block4", "logits")
EARLY = ("block1", "block2")  #: the early layers the findings are about
PENULTIMATE = "block4"
STRUCTURED = ("same", "shift", "cross")  #: the task kinds whose labels keep structure
NUM_CLASSES = 10
INPUT_SHAPE = (3, 32, 32)
INIT_FILE = "init.pt"        #: the weights pretraining started from, beside its run
BLOCK_ORDERS = ("conv-bn-relu-pool", "conv-relu-bn-pool")


# ---------------------------------------------------------------------------------- domains
def study_domain(name: str, data_dirs: dict, argument: str) -> data.Domain:
    """A registered domain the study can use: labelled, with train and test parts, and its folder
    in ``data_dirs`` when it reads files (its 3 × 32 × 32 images and 10 classes are checked when
    rows are built: reading a file set's rows at configuration time would be slow)."""
    domain = data.domain(name, argument=argument)
    if domain.label is None or not {"train", "test"} <= set(domain.splits or domain.parts):
        raise value_error(argument, f"expected a labelled domain with train and test parts, got {name!r}")
    if domain.files and name not in data_dirs:
        raise value_error(argument, f"the {name!r} domain reads its files: give data_dirs={{{name!r}: folder}}")
    return domain


# ---------------------------------------------------------------------------------- tasks
@dataclass
class TaskSpec:
    """A fine-tuning task: ``domain`` ("" is the pretraining domain), partially random labels of
    degree ``randomness`` (0: the true labels) and a label ``shift`` (0: none)."""

    domain: str = ""
    randomness: int = 0
    shift: int = 0

    def check(self, argument: str, data_dirs: dict) -> None:
        if self.domain:
            study_domain(self.domain, data_dirs, f"{argument}.domain")
        if not 0 <= self.randomness < NUM_CLASSES:
            raise value_error(f"{argument}.randomness", f"expected 0..{NUM_CLASSES - 1}, got {self.randomness}")
        if not 0 <= self.shift < NUM_CLASSES:
            raise value_error(f"{argument}.shift", f"expected 0..{NUM_CLASSES - 1}, got {self.shift}")
        if self.randomness and self.shift:
            raise value_error(argument, "give randomness or shift, not both")

    @property
    def label(self) -> str:
        parts = [self.domain or "same"]
        if self.randomness:
            parts.append(f"d={self.randomness}")
        if self.shift:
            parts.append(f"s={self.shift}")
        return " ".join(parts)

    def kind(self, pretraining_domain: str) -> str:
        """``random`` (fully random labels), ``partial`` (0 < d < D − 1), ``shift``, ``cross`` (another
        domain, true labels) or ``same``."""
        if self.randomness == NUM_CLASSES - 1:
            return "random"
        if self.randomness:
            return "partial"
        if self.shift:
            return "shift"
        return "cross" if self.domain and self.domain != pretraining_domain else "same"


PAPER_TASKS = (TaskSpec(), TaskSpec(randomness=1), TaskSpec(randomness=2), TaskSpec(randomness=4),
               TaskSpec(randomness=9), TaskSpec(shift=1), TaskSpec("street_digits"),
               TaskSpec("street_digits", randomness=9), TaskSpec("sklearn_digits"))


# ---------------------------------------------------------------------------------- the config
@dataclass
class Config:
    """The fine-tuning similarity study (``vaetransfer run finetune_similarity --set key=value``)."""

    domain: str = "object_shapes"           # the pretraining domain
    channels: int = 32                      # filters per block (the paper: 64)
    block_order: str = "conv-bn-relu-pool"  # the paper; "conv-relu-bn-pool" is the public code's
    seeds: tuple[int, ...] = (0, 1, 2)
    batch_size: int = 32
    lr: float = 1e-3
    momentum: float = 0.9
    pretrain_n: int = 5_000                 # training rows of the pretraining domain
    pretrain_epochs: int = 25
    test_n: int = 2_000                     # test rows of the from-scratch runs (true labels)
    randomness: tuple[int, ...] = (0, 1, 2, 4, 9)           # d of the from-scratch runs; 0 = pretraining
    memorisation_sizes: tuple[int, ...] = (500, 1_500)      # N of fully random runs (and pretrain_n)
    tasks: tuple[TaskSpec, ...] = (TaskSpec(), TaskSpec(randomness=2), TaskSpec(randomness=4),
                                   TaskSpec(randomness=9), TaskSpec(shift=1), TaskSpec("street_digits"),
                                   TaskSpec("street_digits", randomness=9), TaskSpec("sklearn_digits"))
    finetune_n: int = 5_000
    finetune_test_n: int = 2_000
    finetune_epochs: int = 8
    randomize_test: bool = False            # randomise the test labels of random-label runs too
    cka_n: int = 500                        # held-out inputs of every CKA
    cka_every: int = 1                      # epochs between CKA measurements
    label_seed: int = 0                     # seed s draws its label noise with label_seed + s
    data_seed: int = 0                      # the generated domains' stream; sklearn_digits' halves
    data_dirs: dict = field(default_factory=dict)  # {"cifar10": folder, "svhn": folder} for the file domains
    ci: float = 0.95                        # level of the per-layer CKA intervals of the final models
    ci_resamples: int = 200                 # resamples of the CKA inputs per interval (0: no intervals)
    ci_resampling: str = "jackknife"        # delete-d, ci_resamples blocks; or "bootstrap" (BCa)
    ci_seed: int = 0                        # seed of the draws (of the jackknife's blocks)

    def __post_init__(self):
        for name, low in (("channels", 1), ("batch_size", 2), ("pretrain_n", 2), ("pretrain_epochs", 1),
                          ("test_n", 1), ("finetune_n", 2), ("finetune_test_n", 1), ("finetune_epochs", 1),
                          ("cka_n", 3), ("cka_every", 1), ("label_seed", 0), ("data_seed", 0)):
            if getattr(self, name) < low:
                raise value_error(name, f"expected >= {low}, got {getattr(self, name)}")
        if not self.lr > 0:
            raise value_error("lr", f"expected > 0, got {self.lr}")
        check_interval_fields(self)
        if self.cka_n > min(self.test_n, self.finetune_test_n):
            raise value_error("cka_n", f"expected at most test_n ({self.test_n}) and finetune_test_n "
                                       f"({self.finetune_test_n}): CKA inputs are held-out test rows, got {self.cka_n}")
        if not 0 <= self.momentum < 1:
            raise value_error("momentum", f"expected a value in [0, 1), got {self.momentum}")
        if self.block_order not in BLOCK_ORDERS:
            raise value_error("block_order", f"expected one of {list(BLOCK_ORDERS)}, got {self.block_order!r}")
        if not isinstance(self.data_dirs, dict) or not all(isinstance(v, str) for v in self.data_dirs.values()):
            raise value_error("data_dirs", f"expected {{domain: folder}}, got {self.data_dirs!r}")
        study_domain(self.domain, self.data_dirs, "domain")
        if self.domain == "sklearn_digits":
            raise value_error("domain", "sklearn_digits (1,797 images) is too small to pretrain on; use it as a task")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) != len(self.seeds):
            raise value_error("seeds", f"expected distinct seeds >= 0, got {list(self.seeds)}")
        if (0 not in self.randomness or any(not 0 <= d < NUM_CLASSES for d in self.randomness)
                or len(set(self.randomness)) != len(self.randomness)):
            raise value_error("randomness", f"expected distinct degrees in 0..{NUM_CLASSES - 1} including 0 (the "
                                            f"pretrained models), got {list(self.randomness)}")
        if any(n < 2 or n > self.pretrain_n for n in self.memorisation_sizes) \
                or len(set(self.memorisation_sizes)) != len(self.memorisation_sizes):
            raise value_error("memorisation_sizes", f"expected distinct sizes in 2..pretrain_n ({self.pretrain_n}), "
                                                    f"got {list(self.memorisation_sizes)}")
        labels = []
        for i, t in enumerate(self.tasks):
            t.check(f"tasks[{i}]", self.data_dirs)
            labels.append(t.label)
        if len(set(labels)) != len(labels):
            raise value_error("tasks", f"expected distinct tasks, got {labels}")


PRESETS: dict[str, Config] = {
    # The tests: seconds; every section runs, nothing is learned.
    "smoke": Config(channels=4, seeds=(0, 1), pretrain_n=96, pretrain_epochs=2, test_n=64, randomness=(0, 9),
                    memorisation_sizes=(48,), tasks=(TaskSpec(), TaskSpec(randomness=9), TaskSpec(shift=1),
                                                     TaskSpec("street_digits"), TaskSpec("sklearn_digits")),
                    finetune_n=64, finetune_test_n=32, finetune_epochs=2, cka_n=32, ci_resamples=20),
    # This machine (2 cores, well under an hour): 3 seeds, 32 filters per block, 5,000 pretraining
    # images for 25 epochs, 8 epochs of fine-tuning.
    "small": Config(),
    # This machine in about two hours (2 workers × 1 thread, resumable), each finding decided on
    # networks that trained: small's tasks and degrees d, trained until random labels are memorised,
    # at more training-set sizes N and with the paper's 5 seeds (why these sizes, and their cost:
    # the module docstring).
    "medium": Config(seeds=(0, 1, 2, 3, 4), pretrain_epochs=70, memorisation_sizes=(250, 500, 1_000, 2_500),
                     finetune_epochs=60),
    # The public code's protocol: 150 pretraining epochs on the whole train part, 25 of fine-tuning
    # on 5,000 / 5,000, 5 seeds (on a Ray cluster: see the study's docstring).
    "paper": Config(channels=64, seeds=(0, 1, 2, 3, 4), pretrain_n=50_000, pretrain_epochs=150, test_n=5_000,
                    memorisation_sizes=(1_000, 5_000, 20_000), tasks=PAPER_TASKS, finetune_test_n=5_000,
                    finetune_epochs=25),
}
