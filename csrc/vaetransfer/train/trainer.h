// The training loop over Model × Task × Regularisers × Schedules (runs without the GIL):
// steps-based, seeded shuffling of an in-memory data set (with optional labels), loss weights
// from schedules, freeze phases, evaluation on held-out data, snapshots written atomically,
// exact resume, NaN/inf guard.
//
// A run directory holds history.csv (one row per step: "step", "loss" (the total), the task's
// scalars, each regulariser's term, and every weight whose schedule is not constant) and
// snapshots/step_XXXXXXXX.pt, each a torch.load-able dict with the model's parameters and
// buffers, optimiser state, task, schedules, data order and RNG states. Resuming from the
// latest snapshot replays the same trajectory as an uninterrupted run (same thread count,
// same device). Each snapshot carries the hash of its run's config and a checksum of its
// contents; resume refuses another run's snapshot and falls back past an unreadable or corrupt
// one (renamed *.corrupt). run() polls an interrupt between steps and stops with a snapshot.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/nn/model.h"
#include "vaetransfer/objectives/task.h"
#include "vaetransfer/regularizers/regularizer.h"
#include "vaetransfer/train/optimizer.h"
#include "vaetransfer/schedules/schedule.h"

namespace vaetransfer::train {

// Parameter groups frozen for `steps` steps; phases follow each other from step 0.
struct Phase {
  int64_t steps = 0;
  std::vector<std::string> freeze;
};

struct TrainSpec {
  int64_t steps = 1000;
  int64_t batch_size = 64;
  uint64_t seed = 0;             // data order and the model's noise
  int64_t snapshot_every = 0;    // 0: only the final snapshot
  int64_t keep_snapshots = 0;    // 0: keep all
  int64_t progress_every = 10;   // progress callback period (steps)
  int64_t metrics_every = 0;     // metrics callback period (0: never)
  int64_t eval_every = 0;        // evaluation on the held-out data (0: never)
  int64_t eval_batch_size = 512;
  double data_scale = 1.0;       // x = data.float() * data_scale
  double eval_data_scale = 0.0;  // the held-out data's own scale (0: data_scale)
  std::vector<std::string> freeze;  // frozen for the whole run
  std::vector<Phase> phases;        // frozen in addition, phase by phase
  std::string out_dir;           // empty: no files
  std::string config_hash;       // the run's config, recorded in (and checked against) snapshots
  // Mixed precision of the model's forward: "fp32", "bf16" or "fp16" (autocast; fp32 weights,
  // optimiser state, loss and regularisers). "fp16" adds dynamic loss scaling: the loss is
  // multiplied by the scale before backward, a step whose gradients overflow is skipped and the
  // scale halved, and the scale doubles after `growth_interval` good steps (torch.amp.GradScaler's
  // rule and defaults); the scale is a history column and is kept in snapshots.
  std::string precision = "fp32";
  double initial_loss_scale = 65536.0;
  int64_t growth_interval = 2000;
};

struct RegularizerSlot {
  std::string label;  // history column of the term; the weight is "<label>_weight"
  regularizers::RegularizerPtr regularizer;
  schedules::SchedulePtr weight;
};

// One step's report (after the update of step `step`, 1-based): values aligned with columns().
struct StepReport {
  int64_t step = 0;
  std::vector<double> values;
};

// Evaluation on the held-out data: the task's scalars averaged over examples (and "loss").
struct EvalReport {
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> values;
};

// Raised when the loss becomes NaN or inf; the run directory keeps the last good snapshot.
class TrainingDivergedError : public std::runtime_error {
 public:
  TrainingDivergedError(int64_t step, const std::string& message) : std::runtime_error(message), step_(step) {}
  int64_t step() const { return step_; }

 private:
  int64_t step_;
};

class Trainer {
 public:
  using Progress = std::function<void(const StepReport&)>;
  // Called every metrics_every and every eval_every steps; `eval` is null when none ran.
  using Metrics = std::function<void(const StepReport&, const EvalReport* eval)>;
  // Polled between steps: true stops the run after a snapshot of the step reached.
  using Interrupted = std::function<bool()>;

  // `data`: uint8 or floating [N, input_shape...] on the CPU (batches are moved to the model's
  // device); `labels`: int64 [N] or undefined; `eval_data`/`eval_labels`: the held-out set (may
  // be undefined). `schedules` override the task's weights by name.
  Trainer(nn::ModelPtr model, objectives::TaskPtr task, std::vector<RegularizerSlot> regularizers,
          std::map<std::string, schedules::SchedulePtr> schedules, OptimizerSpec optimizer, at::Tensor data, at::Tensor labels,
          at::Tensor eval_data, at::Tensor eval_labels, TrainSpec spec);

  int64_t step() const { return step_; }
  const TrainSpec& spec() const { return spec_; }
  const std::vector<std::string>& columns() const { return columns_; }
  // Loads the latest readable snapshot of out_dir if there is one (and truncates history.csv to
  // it); returns the step reached (0 when starting afresh). Snapshots that cannot be read or fail
  // their checksum are renamed *.corrupt and listed in skipped(); one of another config is refused.
  int64_t resume();
  const std::vector<std::string>& skipped() const { return skipped_; }
  // Trains until `until` (0: the end); returns early, after a snapshot, when `interrupted` says so.
  void run(const Progress& progress, const Metrics& metrics, int64_t until = 0,
           const Interrupted& interrupted = nullptr);
  // The task's scalars on the held-out data at the current weights, in eval mode, without
  // touching the training state (RNG, BatchNorm statistics, gradients).
  EvalReport evaluate();
  std::string save_snapshot();
  const std::vector<StepReport>& reports() const { return reports_; }
  // The weights (task and regulariser λ's) at a 0-based step.
  objectives::Weights weights_at(int64_t step) const;

 private:
  at::Tensor next_indices();
  StepReport train_step();
  void apply_phase();
  void flush_history();
  std::string snapshot_dir() const;
  std::vector<std::string> frozen_groups(int64_t step) const;
  void backward_and_step(const at::Tensor& loss);

  nn::ModelPtr model_;
  objectives::TaskPtr task_;
  std::vector<RegularizerSlot> regularizers_;
  std::map<std::string, schedules::SchedulePtr> weights_;  // every weight: task defaults overridden by `schedules`
  std::vector<std::string> logged_weights_;     // non-constant ones: reported as columns
  Optimizer optimizer_;
  at::Tensor data_, labels_, eval_data_, eval_labels_;
  TrainSpec spec_;
  std::vector<std::string> columns_;
  bool capture_layers_ = false;
  bool capture_traces_ = false;
  int64_t step_ = 0;
  int64_t phase_ = -2;  // index of the applied phase (-1: after the last; -2: none applied yet)
  at::Generator noise_gen_, shuffle_gen_;
  at::Tensor permutation_;
  int64_t position_ = 0, epoch_ = 0;
  std::vector<StepReport> reports_;
  size_t history_flushed_ = 0;
  std::string last_snapshot_;
  int64_t last_snapshot_step_ = -1;
  std::vector<std::string> skipped_;
  at::ScalarType precision_ = at::kFloat;
  bool loss_scaling_ = false;
  double loss_scale_ = 1.0;
  int64_t good_steps_ = 0;  // steps since the scale last changed
};

// Snapshot files (snapshot.cpp): a dict of str → tensor / int / float / str / list / dict.
struct Snapshot {
  int64_t step = 0;
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer;
  std::string optimizer_name, task_name;
  std::vector<std::pair<std::string, std::string>> task, schedules;  // parameter → value, weight → schedule
  std::vector<std::string> columns, frozen;
  std::vector<std::pair<std::string, at::Tensor>> regularizers;  // "<label>/<name>" → state tensor
  at::Tensor permutation, noise_rng, shuffle_rng;
  int64_t position = 0, epoch = 0;
  std::string config_hash;  // empty in snapshots of earlier releases
};
// A snapshot file that does not parse, is not a snapshot or fails its checksum (an ArgumentError
// naming "path"); a file that cannot be opened, or one of an old format, raises ArgumentError.
class CorruptSnapshotError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};
void write_snapshot(const Snapshot& s, const std::string& path);  // atomic: temp file + rename
// Reads and verifies the checksum (ArgumentError "path" naming the file when either fails).
Snapshot read_snapshot(const std::string& path);
// A 64-bit checksum of everything a snapshot restores: any single changed word changes it.
std::string snapshot_checksum(const Snapshot& s);
// Model parameters and buffers only (any snapshot version), for loading a run's model anywhere.
std::vector<std::pair<std::string, at::Tensor>> read_snapshot_model(const std::string& path);
// Sorted (step, path) of out_dir/snapshots.
std::vector<std::pair<int64_t, std::string>> list_snapshots(const std::string& out_dir);

}  // namespace vaetransfer::train
