// The training loop (runs without the GIL): steps-based, seeded shuffling of an in-memory
// data set, snapshots every N steps written atomically, exact resume, NaN/inf guard.
//
// A run directory holds history.csv (one row per step) and snapshots/step_XXXXXXXX.pt,
// each a torch.load-able dict with the model, optimiser state, objective state, data order
// and RNG states. Resuming from the latest snapshot replays the same trajectory as an
// uninterrupted run (same thread count, same device).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vaetransfer/nn/vae.h"
#include "vaetransfer/objectives/objective.h"
#include "vaetransfer/train/optimizer.h"

namespace vaetransfer::train {

struct TrainSpec {
  int64_t steps = 1000;
  int64_t batch_size = 64;
  uint64_t seed = 0;            // data order and reparameterisation noise
  int64_t snapshot_every = 0;   // 0: only the final snapshot
  int64_t keep_snapshots = 0;   // 0: keep all
  int64_t progress_every = 10;  // progress callback period (steps)
  int64_t metrics_every = 0;    // metrics hook period (0: never)
  bool report_tc = false;       // also report the minibatch-weighted TC (no gradient) for every objective
  double data_scale = 1.0;      // x = data.float() * data_scale
  std::string out_dir;          // empty: no files
};

// One step's report (after the update of step `step`, 1-based). NaN marks "not computed".
struct StepReport {
  int64_t step = 0;
  double loss = 0, reconstruction = 0, kl = 0, regularizer = 0, tc = NAN, capacity = NAN;
  std::vector<double> kl_per_dim;
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
  using Callback = std::function<void(const StepReport&)>;

  // `data`: uint8 or floating [N, input_shape...] on the CPU (batches are moved to the model's device).
  Trainer(std::shared_ptr<nn::VAE> model, std::shared_ptr<objectives::Objective> objective, OptimizerSpec optimizer,
          at::Tensor data, TrainSpec spec);

  int64_t step() const { return step_; }
  const TrainSpec& spec() const { return spec_; }
  // Loads the latest snapshot of out_dir if there is one (and truncates history.csv to it);
  // returns the step reached (0 when starting afresh).
  int64_t resume();
  // Runs until spec.steps (or `until` when smaller and > 0). Progress is called every
  // progress_every steps and on the last one; metrics every metrics_every steps.
  void run(const Callback& progress, const Callback& metrics, int64_t until = 0);
  // Writes snapshots/step_XXXXXXXX.pt atomically and returns its path.
  std::string save_snapshot();
  // Reports of the steps run in this session.
  const std::vector<StepReport>& reports() const { return reports_; }

 private:
  at::Tensor next_indices();
  StepReport train_step();
  void flush_history();
  std::string snapshot_dir() const;

  std::shared_ptr<nn::VAE> model_;
  std::shared_ptr<objectives::Objective> objective_;
  Optimizer optimizer_;
  at::Tensor data_;
  TrainSpec spec_;
  int64_t step_ = 0;
  at::Generator noise_gen_, shuffle_gen_;
  at::Tensor permutation_;
  int64_t position_ = 0, epoch_ = 0;
  std::vector<StepReport> reports_;
  size_t history_flushed_ = 0;
  std::string last_snapshot_;
};

// Snapshot files (snapshot.cpp): a dict of str → tensor / int / float / str / list / dict.
struct Snapshot {
  int64_t step = 0;
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer;
  std::string optimizer_name, objective_name;
  std::vector<std::pair<std::string, double>> objective;
  at::Tensor permutation, noise_rng, shuffle_rng;
  int64_t position = 0, epoch = 0;
  std::vector<std::string> frozen;
};
void write_snapshot(const Snapshot& s, const std::string& path);  // atomic: temp file + rename
Snapshot read_snapshot(const std::string& path);
// Model weights only, for loading a run's model anywhere.
std::vector<std::pair<std::string, at::Tensor>> read_snapshot_model(const std::string& path);
// Sorted (step, path) of out_dir/snapshots.
std::vector<std::pair<int64_t, std::string>> list_snapshots(const std::string& out_dir);

}  // namespace vaetransfer::train
