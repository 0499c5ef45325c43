#include "vaetransfer/train/trainer.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "vaetransfer/common/autocast.h"
#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"

namespace vaetransfer::train {

namespace fs = std::filesystem;

namespace {

// Loss-scaling state stored beside the optimiser's in a snapshot (names no optimiser uses).
const std::string kLossScale = "amp/loss_scale", kGoodSteps = "amp/good_steps";

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

Trainer::Trainer(nn::ModelPtr model, objectives::TaskPtr task, std::vector<RegularizerSlot> regularizers,
                 std::map<std::string, schedules::SchedulePtr> schedules, OptimizerSpec optimizer, at::Tensor data,
                 at::Tensor labels, at::Tensor eval_data, at::Tensor eval_labels, TrainSpec spec)
    : model_(std::move(model)),
      task_(std::move(task)),
      regularizers_(std::move(regularizers)),
      optimizer_(std::move(optimizer), model_->parameters_named()),
      data_(std::move(data)),
      labels_(std::move(labels)),
      eval_data_(std::move(eval_data)),
      eval_labels_(std::move(eval_labels)),
      spec_(std::move(spec)) {
  objectives::check_family(*task_, *model_);
  task_->check_examples(*model_, data_, "data");
  task_->check_data(*model_, data_, labels_);
  if (labels_.defined()) labels_ = labels_.to(at::kLong).contiguous();
  if (eval_data_.defined()) {
    task_->check_examples(*model_, eval_data_, "eval_data");
    if (task_->needs_labels())
      VT_CHECK_ARG(eval_labels_.defined(), "eval_labels", "the held-out data needs labels for the '", task_->name(),
                   "' objective");
    task_->check_data(*model_, eval_data_, eval_labels_);
    eval_data_ = eval_data_.contiguous();
    if (eval_labels_.defined()) eval_labels_ = eval_labels_.to(at::kLong).contiguous();
  }
  VT_CHECK_ARG(spec_.steps >= 1, "steps", "expected >= 1, got ", spec_.steps);
  VT_CHECK_ARG(spec_.batch_size >= 1, "batch_size", "expected >= 1, got ", spec_.batch_size);
  VT_CHECK_ARG(spec_.snapshot_every >= 0, "snapshot_every", "expected >= 0, got ", spec_.snapshot_every);
  VT_CHECK_ARG(spec_.keep_snapshots >= 0, "keep_snapshots", "expected >= 0, got ", spec_.keep_snapshots);
  VT_CHECK_ARG(spec_.progress_every >= 1, "progress_every", "expected >= 1, got ", spec_.progress_every);
  VT_CHECK_ARG(spec_.metrics_every >= 0, "metrics_every", "expected >= 0, got ", spec_.metrics_every);
  VT_CHECK_ARG(spec_.eval_every >= 0, "eval_every", "expected >= 0, got ", spec_.eval_every);
  VT_CHECK_ARG(spec_.eval_every == 0 || eval_data_.defined(), "eval_every",
               "evaluation every ", spec_.eval_every, " steps needs held-out data (eval_data)");
  VT_CHECK_ARG(spec_.eval_batch_size >= 1, "eval_batch_size", "expected >= 1, got ", spec_.eval_batch_size);
  VT_CHECK_ARG(std::isfinite(spec_.data_scale) && spec_.data_scale > 0, "data_scale", "expected > 0, got ",
               spec_.data_scale);
  VT_CHECK_ARG(std::isfinite(spec_.eval_data_scale) && spec_.eval_data_scale >= 0, "eval_data_scale",
               "expected > 0 (or 0: data_scale), got ", spec_.eval_data_scale);
  precision_ = precision_dtype(spec_.precision);
  VT_CHECK_ARG(precision_ == at::kFloat || model_->supports_precision(), "precision", "the ", model_->family(),
               " family trains in fp32 only, got '", spec_.precision, "'");
  loss_scaling_ = precision_ == at::kHalf;
  VT_CHECK_ARG(std::isfinite(spec_.initial_loss_scale) && spec_.initial_loss_scale > 0, "initial_loss_scale",
               "expected > 0, got ", spec_.initial_loss_scale);
  VT_CHECK_ARG(spec_.growth_interval >= 1, "growth_interval", "expected >= 1, got ", spec_.growth_interval);
  loss_scale_ = loss_scaling_ ? spec_.initial_loss_scale : 1.0;
  for (const auto& g : spec_.freeze) model_->group(g, "freeze");
  for (const auto& ph : spec_.phases) {
    VT_CHECK_ARG(ph.steps >= 1, "phases", "expected phases of >= 1 step, got ", ph.steps);
    for (const auto& g : ph.freeze) model_->group(g, "phases");
  }

  // Weights: the task's defaults, then the given schedules, then each regulariser's λ.
  for (const auto& w : task_->weights()) weights_[w.name] = w.schedule;
  for (const auto& [name, s] : schedules) {
    if (!weights_.count(name)) {
      std::vector<std::string> known;
      for (const auto& [k, v] : weights_) known.push_back(k);
      VT_CHECK_ARG(false, "schedules", "the '", task_->name(), "' objective has no weight '", name, "'; its weights: ",
                   known.empty() ? std::string("(none)") : c10::Join(", ", known));
    }
    weights_[name] = s;
  }
  std::set<std::string> labels_seen;
  columns_ = {"loss"};
  for (auto& c : task_->columns(*model_)) columns_.push_back(c);
  for (const auto& r : regularizers_) {
    VT_CHECK_ARG(!r.label.empty() && labels_seen.insert(r.label).second &&
                     std::find(columns_.begin(), columns_.end(), r.label) == columns_.end(),
                 "regularizers", "each regulariser needs a distinct label that is not a task column; got '", r.label,
                 "'");
    r.regularizer->check(*model_);
    weights_[r.label + "_weight"] = r.weight;
    columns_.push_back(r.label);
    for (const auto& part : r.regularizer->parts(*model_)) columns_.push_back(r.label + "_" + part);
    capture_layers_ |= r.regularizer->needs_layers();
    capture_traces_ |= r.regularizer->needs_traces();
  }
  for (const auto& [name, s] : weights_)
    if (!s->is_constant()) {
      logged_weights_.push_back(name);
      columns_.push_back(name);
    }
  if (loss_scaling_) columns_.push_back("loss_scale");  // the scale this step's loss was multiplied by
  {  // history.csv needs distinct column names (a regulariser label could repeat a weight's name)
    std::set<std::string> seen{"step"};
    for (const auto& c : columns_)
      VT_CHECK_ARG(seen.insert(c).second, "regularizers", "the history column '", c,
                   "' appears twice; give the regulariser another label");
  }

  data_ = data_.contiguous();
  noise_gen_ = nn::make_generator(model_->device(), splitmix64(spec_.seed ^ 0x6e6f697365ull));
  shuffle_gen_ = nn::make_generator(at::kCPU, splitmix64(spec_.seed ^ 0x73687566ull));
  permutation_ = at::randperm(data_.size(0), shuffle_gen_, at::kLong);
  model_->train(true);
}

objectives::Weights Trainer::weights_at(int64_t step) const {
  objectives::Weights w;
  for (const auto& [name, s] : weights_) w[name] = s->value(step);
  return w;
}

std::string Trainer::snapshot_dir() const { return (fs::path(spec_.out_dir) / "snapshots").string(); }

std::vector<std::string> Trainer::frozen_groups(int64_t step) const {
  auto groups = spec_.freeze;
  int64_t start = 0;
  for (const auto& ph : spec_.phases) {
    if (step < start + ph.steps) {
      groups.insert(groups.end(), ph.freeze.begin(), ph.freeze.end());
      break;
    }
    start += ph.steps;
  }
  return groups;
}

void Trainer::apply_phase() {
  int64_t index = -1, start = 0;
  for (size_t i = 0; i < spec_.phases.size(); ++i) {
    if (step_ < start + spec_.phases[i].steps) {
      index = static_cast<int64_t>(i);
      break;
    }
    start += spec_.phases[i].steps;
  }
  if (index == phase_) return;
  model_->set_trainable({"all"}, true);
  const auto groups = frozen_groups(step_);
  if (!groups.empty()) model_->set_trainable(groups, false);
  bool any = false;
  for (const auto& p : model_->parameters(true)) any = any || p.requires_grad();
  VT_CHECK_ARG(any, index >= 0 ? "phases" : "freeze", "freezes every parameter", index >= 0 ? " in phase " : "",
               index >= 0 ? std::to_string(index) : "", " (from step ", step_, "): nothing would train");
  phase_ = index;
}

at::Tensor Trainer::next_indices() {
  const int64_t n = data_.size(0), b = spec_.batch_size;
  std::vector<at::Tensor> parts;
  int64_t need = b;
  while (need > 0) {
    if (position_ == n) {
      permutation_ = at::randperm(n, shuffle_gen_, at::kLong);
      position_ = 0;
      ++epoch_;
    }
    const int64_t take = std::min(need, n - position_);
    parts.push_back(permutation_.slice(0, position_, position_ + take));
    position_ += take;
    need -= take;
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts);
}

namespace {

// The model's forward at the run's precision for one scope (the model object outlives the
// trainer, e.g. for activations afterwards: it returns to its previous precision).
class PrecisionScope {
 public:
  // `every_layer`: every emitted layer in fp32 (a regulariser reads them), else the outputs only.
  PrecisionScope(nn::Model& model, at::ScalarType dtype, bool every_layer)
      : model_(model), previous_(model.precision()) {
    model_.set_precision(dtype, every_layer);
  }
  ~PrecisionScope() { model_.set_precision(previous_); }

 private:
  nn::Model& model_;
  at::ScalarType previous_;
};

// The model's step key for one training step (nn::Model::set_step_key), unset again afterwards.
class StepKeyScope {
 public:
  StepKeyScope(nn::Model& model, uint64_t seed, int64_t step) : model_(model) {
    model_.set_step_key(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(step)));
  }
  ~StepKeyScope() { model_.set_step_key(std::nullopt); }

 private:
  nn::Model& model_;
};

// Rows of the CPU data set on `device`: to a GPU through pinned memory without blocking the host
// (the copy overlaps the previous step's kernels); on the CPU as they are.
at::Tensor to_device(const at::Tensor& rows, at::Device device) {
  if (!device.is_cuda()) return rows.to(device);
  return rows.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

void Trainer::backward_and_step(const at::Tensor& loss) {
  optimizer_.zero_grad();
  if (!loss_scaling_) {
    loss.backward();
    optimizer_.step();
    return;
  }
  (loss * loss_scale_).backward();
  std::vector<at::Tensor> grads;
  for (const auto& p : model_->parameters(true))
    if (p.grad().defined()) grads.push_back(p.grad());
  // Unscale in place and flag any inf/NaN (the op GradScaler uses, on any device).
  auto found_inf = at::zeros({1}, loss.options().dtype(at::kFloat));
  auto inv_scale = at::full({1}, 1.0 / loss_scale_, loss.options().dtype(at::kFloat));
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  if (found_inf.item<float>() != 0.0f) {  // overflow: skip this update, halve the scale
    loss_scale_ *= 0.5;
    good_steps_ = 0;
    return;
  }
  optimizer_.step();
  if (++good_steps_ == spec_.growth_interval) {
    loss_scale_ *= 2.0;
    good_steps_ = 0;
  }
}

StepReport Trainer::train_step() {
  apply_phase();
  PrecisionScope precision(*model_, precision_, capture_layers_ || capture_traces_);
  StepKeyScope key(*model_, spec_.seed, step_);
  const auto idx = next_indices();
  objectives::Batch batch;
  batch.x = model_->as_input(to_device(data_.index_select(0, idx), model_->device()));
  if (spec_.data_scale != 1.0 && batch.x.is_floating_point()) batch.x.mul_(spec_.data_scale);
  if (labels_.defined()) batch.y = to_device(labels_.index_select(0, idx), model_->device());
  objectives::StepContext ctx{step_, weights_at(step_), &noise_gen_, capture_layers_};
  nn::UnitTraces traces;
  objectives::TaskOutput out;
  {
    std::optional<nn::TraceScope> scope;
    if (capture_traces_) scope.emplace(*model_, &traces);
    out = task_->step(*model_, batch, ctx);
  }
  if (capture_traces_) out.traces = &traces;
  auto loss = out.loss;
  std::vector<at::Tensor> packed = {at::Tensor()};  // the total loss goes first
  for (const auto& [n, t] : out.scalars) packed.push_back(t.detach().reshape({-1}).to(at::kDouble));
  for (const auto& r : regularizers_) {
    auto term = r.regularizer->term(*model_, batch, out, ctx);
    loss = loss + ctx.weights.at(r.label + "_weight") * term.value;
    packed.push_back(term.value.detach().reshape({-1}).to(at::kDouble));
    for (const auto& part : term.parts) packed.push_back(part.detach().reshape({-1}).to(at::kDouble));
  }
  packed[0] = loss.detach().reshape({-1}).to(at::kDouble);
  // One device→host copy for the whole report.
  auto host = at::cat(packed).to(at::kCPU);
  StepReport r;
  r.step = step_ + 1;
  const double* v = host.data_ptr<double>();
  r.values.assign(v, v + host.numel());
  for (const auto& w : logged_weights_) r.values.push_back(ctx.weights.at(w));
  if (loss_scaling_) r.values.push_back(loss_scale_);
  TORCH_CHECK(r.values.size() == columns_.size(), "the '", task_->name(), "' objective reported ", r.values.size(),
              " values for ", columns_.size(), " columns");
  if (!std::isfinite(r.values[0])) {
    std::ostringstream msg;
    msg << "the loss became " << fmt(r.values[0]) << " at step " << r.step << " (";
    for (size_t i = 1; i < columns_.size() && i < 8; ++i) msg << (i > 1 ? ", " : "") << columns_[i] << " " << fmt(r.values[i]);
    msg << "); training stopped. ";
    if (last_snapshot_.empty())
      msg << "No snapshot was written before it.";
    else
      msg << "The last good snapshot is " << last_snapshot_ << ".";
    msg << " Try a smaller learning rate.";
    throw TrainingDivergedError(r.step, msg.str());
  }
  backward_and_step(loss);
  ++step_;
  return r;
}

EvalReport Trainer::evaluate() {
  VT_CHECK_ARG(eval_data_.defined(), "eval_data", "no held-out data was given to this trainer");
  at::NoGradGuard no_grad;
  PrecisionScope precision(*model_, precision_, false);
  const bool was_training = model_->is_training();
  model_->eval();
  // A stream of its own per evaluation: the training RNG is not touched, and the result
  // depends only on the weights and the step.
  auto gen = nn::make_generator(model_->device(), splitmix64(spec_.seed ^ 0x6576616cull ^ splitmix64(step_)));
  const int64_t n = eval_data_.size(0);
  const double eval_scale = spec_.eval_data_scale > 0 ? spec_.eval_data_scale : spec_.data_scale;
  std::vector<double> sums;
  std::vector<std::string> names;
  try {
    for (int64_t s = 0; s < n; s += spec_.eval_batch_size) {
      const int64_t e = std::min(n, s + spec_.eval_batch_size);
      objectives::Batch batch;
      batch.x = model_->as_input(eval_data_.slice(0, s, e).to(model_->device()));
      // Out of place: a float slice of the caller's held-out data is a view, never to be changed.
      if (eval_scale != 1.0 && batch.x.is_floating_point()) batch.x = batch.x * eval_scale;
      if (eval_labels_.defined()) batch.y = eval_labels_.slice(0, s, e).to(model_->device());
      objectives::StepContext ctx{step_, weights_at(std::max<int64_t>(0, step_ - 1)), &gen, false};
      auto out = task_->step(*model_, batch, ctx);
      std::vector<at::Tensor> packed = {out.loss.reshape({-1}).to(at::kDouble)};
      for (const auto& [k, t] : out.scalars) packed.push_back(t.reshape({-1}).to(at::kDouble));
      auto host = at::cat(packed).to(at::kCPU);
      if (names.empty()) {
        names = {"loss"};
        for (auto& c : objectives::expand_columns(out.scalars)) names.push_back(c);
        sums.assign(names.size(), 0.0);
      }
      const double* v = host.data_ptr<double>();
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += v[i] * static_cast<double>(e - s);
    }
  } catch (...) {
    model_->train(was_training);
    throw;
  }
  model_->train(was_training);
  EvalReport r;
  r.step = step_;
  for (size_t i = 0; i < names.size(); ++i) r.values.emplace_back(names[i], sums[i] / static_cast<double>(n));
  return r;
}

void Trainer::run(const Progress& progress, const Metrics& metrics, int64_t until, const Interrupted& interrupted) {
  const int64_t end = until > 0 ? std::min(until, spec_.steps) : spec_.steps;
  while (step_ < end) {
    if (interrupted && interrupted()) {  // between steps: the snapshot holds a whole step
      if (!spec_.out_dir.empty() && step_ > 0 && last_snapshot_step_ != step_) save_snapshot();
      return;
    }
    try {
      reports_.push_back(train_step());
    } catch (const TrainingDivergedError&) {
      // Keep the loss up to the step that broke: a run diverging before its first snapshot
      // would otherwise leave no history of what it did (a resume truncates these rows again).
      if (!spec_.out_dir.empty()) flush_history();
      throw;
    }
    const auto& r = reports_.back();
    // Metrics before the snapshot: a run killed in between resumes from the previous snapshot
    // and writes this step's metrics again (never a snapshot whose metrics line is missing).
    const bool eval_due = spec_.eval_every > 0 && step_ % spec_.eval_every == 0;
    const bool metrics_due = spec_.metrics_every > 0 && step_ % spec_.metrics_every == 0;
    if (metrics && (eval_due || metrics_due)) {
      if (eval_due) {
        auto e = evaluate();
        metrics(r, &e);
      } else {
        metrics(r, nullptr);
      }
    }
    if (!spec_.out_dir.empty() &&
        ((spec_.snapshot_every > 0 && step_ % spec_.snapshot_every == 0) || step_ == spec_.steps))
      save_snapshot();
    if (progress && (step_ % spec_.progress_every == 0 || step_ == end)) {
      try {
        progress(r);
      } catch (...) {  // e.g. Ctrl-C inside a progress bar: this step is whole (metrics written), keep it
        if (!spec_.out_dir.empty() && last_snapshot_step_ != step_) save_snapshot();
        throw;
      }
    }
  }
}

void Trainer::flush_history() {
  if (spec_.out_dir.empty()) return;
  const auto path = fs::path(spec_.out_dir) / "history.csv";
  const bool fresh = !fs::exists(path);
  std::ofstream out(path, std::ios::app);
  VT_CHECK_ARG(out.good(), "out_dir", "cannot write ", path.string());
  if (fresh) {
    out << "step";
    for (const auto& c : columns_) out << "," << c;
    out << "\n";
  }
  for (; history_flushed_ < reports_.size(); ++history_flushed_) {
    const auto& r = reports_[history_flushed_];
    out << r.step;
    for (double v : r.values) out << "," << fmt(v);
    out << "\n";
  }
  out.flush();
}

std::string Trainer::save_snapshot() {
  VT_CHECK_ARG(!spec_.out_dir.empty(), "out_dir", "snapshots need an output directory");
  std::error_code error;
  fs::create_directories(snapshot_dir(), error);
  VT_CHECK_ARG(!error, "out_dir", "cannot create the snapshot folder ", snapshot_dir(), ": ", error.message());
  // History first: rows past the snapshot are dropped again on resume.
  flush_history();
  Snapshot s;
  s.step = step_;
  for (auto& [n, t] : model_->state()) s.model.emplace_back(n, t.cpu());
  for (auto& [n, t] : optimizer_.state()) s.optimizer.emplace_back(n, t.detach().cpu().clone());
  if (loss_scaling_) {  // with the optimiser's state: resume continues with the same scale
    s.optimizer.emplace_back(kLossScale, at::tensor(loss_scale_, at::kDouble));
    s.optimizer.emplace_back(kGoodSteps, at::tensor(good_steps_, at::kLong));
  }
  s.optimizer_name = optimizer_.spec().name;
  s.task_name = task_->name();
  for (const auto& [k, v] : task_->params().values()) s.task.emplace_back(k, to_string(v));
  for (const auto& [k, v] : weights_) s.schedules.emplace_back(k, v->describe());
  s.columns = columns_;
  s.frozen = model_->frozen_parameters();
  for (const auto& r : regularizers_)
    for (auto& [n, t] : r.regularizer->state()) s.regularizers.emplace_back(r.label + "/" + n, t.detach().cpu().clone());
  s.permutation = permutation_;
  s.position = position_;
  s.epoch = epoch_;
  s.noise_rng = noise_gen_.get_state();
  s.shuffle_rng = shuffle_gen_.get_state();
  s.config_hash = spec_.config_hash;
  char name[64];
  std::snprintf(name, sizeof name, "step_%08lld.pt", static_cast<long long>(step_));
  const auto path = (fs::path(snapshot_dir()) / name).string();
  write_snapshot(s, path);
  last_snapshot_ = path;
  last_snapshot_step_ = step_;
  if (spec_.keep_snapshots > 0) {
    auto all = list_snapshots(spec_.out_dir);
    for (size_t i = 0; i + spec_.keep_snapshots < all.size(); ++i) fs::remove(all[i].second);
  }
  return path;
}

int64_t Trainer::resume() {
  if (spec_.out_dir.empty()) return step_;
  // The newest snapshot that reads and matches its checksum; damaged ones are set aside.
  auto all = list_snapshots(spec_.out_dir);
  std::optional<Snapshot> found;
  std::string path;
  for (auto it = all.rbegin(); it != all.rend() && !found; ++it) {
    try {
      found = read_snapshot(it->second);
      path = it->second;
    } catch (const CorruptSnapshotError& e) {
      const auto aside = it->second + ".corrupt";
      fs::rename(it->second, aside);
      skipped_.push_back(std::string(e.what()) + "; moved to " + aside);
    }
  }
  if (!found) {
    // A run that never reached a (readable) snapshot starts afresh: drop its partial history.
    fs::remove(fs::path(spec_.out_dir) / "history.csv");
    return step_;
  }
  auto& s = *found;
  VT_CHECK_ARG(s.config_hash.empty() || spec_.config_hash.empty() || s.config_hash == spec_.config_hash, "out_dir",
               "the snapshot ", path, " belongs to a run with another config (hash ", s.config_hash, ", this run's ",
               spec_.config_hash, "); use another out_dir");
  VT_CHECK_ARG(s.optimizer_name == optimizer_.spec().name, "optimizer", "the snapshot ", path, " was made with '",
               s.optimizer_name, "', not '", optimizer_.spec().name, "'");
  VT_CHECK_ARG(s.task_name == task_->name(), "objective", "the snapshot ", path, " was made with '", s.task_name,
               "', not '", task_->name(), "'");
  {
    std::vector<std::pair<std::string, std::string>> task;
    for (const auto& [k, v] : task_->params().values()) task.emplace_back(k, to_string(v));
    VT_CHECK_ARG(s.task.empty() || s.task == task, "objective", "the snapshot ", path, " was made with other '", task_->name(),
                 "' parameters");
  }
  std::vector<std::pair<std::string, std::string>> schedules;
  for (const auto& [k, v] : weights_) schedules.emplace_back(k, v->describe());
  VT_CHECK_ARG(s.schedules == schedules && s.columns == columns_, "schedules", "the snapshot ", path,
               " was made with other weights or schedules");
  VT_CHECK_ARG(s.permutation.numel() == data_.size(0), "data", "the snapshot ", path, " was made with ",
               s.permutation.numel(), " examples, got ", data_.size(0));
  model_->load_state(s.model);
  {
    std::vector<std::pair<std::string, at::Tensor>> optimizer;
    for (const auto& [n, t] : s.optimizer) {
      if (n == kLossScale)
        loss_scale_ = t.item<double>();
      else if (n == kGoodSteps)
        good_steps_ = t.item<int64_t>();
      else
        optimizer.emplace_back(n, t);
    }
    optimizer_.load_state(optimizer);
  }
  for (auto& r : regularizers_) {
    nn::Named state;
    const auto prefix = r.label + "/";
    for (const auto& [n, t] : s.regularizers)
      if (n.rfind(prefix, 0) == 0) state.emplace_back(n.substr(prefix.size()), t.to(model_->device()));
    r.regularizer->load_state(state);
  }
  permutation_ = s.permutation;
  position_ = s.position;
  epoch_ = s.epoch;
  noise_gen_.set_state(s.noise_rng);
  shuffle_gen_.set_state(s.shuffle_rng);
  step_ = s.step;
  phase_ = -2;  // re-applied before the next step
  last_snapshot_ = path;
  last_snapshot_step_ = step_;
  // Keep history rows up to the snapshot only.
  const auto hist = fs::path(spec_.out_dir) / "history.csv";
  if (fs::exists(hist)) {
    std::ifstream in(hist);
    std::string line, kept;
    bool header = true;
    const auto fields = static_cast<std::ptrdiff_t>(columns_.size() + 1);
    while (std::getline(in, line)) {
      // Keep whole rows up to the snapshot; a row torn by a kill (fewer fields) is dropped.
      bool keep = header;
      if (!header && std::count(line.begin(), line.end(), ',') + 1 == fields) {
        char* end = nullptr;
        const long long step = std::strtoll(line.c_str(), &end, 10);
        keep = end != line.c_str() && *end == ',' && step <= step_;
      }
      if (keep) kept += line + "\n";
      header = false;
    }
    in.close();
    const auto tmp = hist.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << kept;
    }
    fs::rename(tmp, hist);
  }
  return step_;
}

}  // namespace vaetransfer::train
