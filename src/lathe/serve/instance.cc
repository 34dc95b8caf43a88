#include "lathe/serve/instance.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lathe::serve {

std::vector<Tensor> MergeInputs(const Batch& batch) {
  std::vector<Tensor> merged;
  const auto& first = batch.front()->inputs;
  int64_t rows = BatchRows(batch);
  for (size_t i = 0; i < first.size(); ++i) {
    Tensor t;
    t.name = first[i].name;
    t.datatype = first[i].datatype;
    t.shape = first[i].shape;
    if (!t.shape.empty()) t.shape[0] = rows;
    size_t bytes = 0;
    for (const auto& r : batch) bytes += r->inputs[i].data.size();
    t.data.reserve(bytes);
    for (const auto& r : batch)
      t.data += r->inputs[i].data;  // BYTES elements are self-delimited too
    merged.push_back(std::move(t));
  }
  return merged;
}

Result<std::vector<std::vector<Tensor>>> SplitOutputs(std::vector<Tensor> outputs,
                                                      const std::vector<int64_t>& rows) {
  std::vector<std::vector<Tensor>> per(rows.size());
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  for (auto& out : outputs) {
    if (rows.size() == 1) {
      per[0].push_back(std::move(out));
      continue;
    }
    if (out.shape.empty() || out.shape[0] != total) {
      return Status::Internal(
          fmt::format("output '{}' has shape {}, but the batch has {} rows: a batching model "
                      "must return the batch size as the first dimension",
                      out.name, ShapeString(out.shape), total));
    }
    int64_t per_row = total == 0 ? 0 : ElementCount(out.shape) / total;
    std::vector<size_t> offsets;
    if (out.datatype == DataType::kBytes) {
      ASSIGN_OR_RETURN(offsets, BytesElementOffsets(out.data));
    }
    int64_t elem = 0;
    for (size_t k = 0; k < rows.size(); ++k) {
      Tensor t;
      t.name = out.name;
      t.datatype = out.datatype;
      t.shape = out.shape;
      t.shape[0] = rows[k];
      int64_t n = per_row * rows[k];
      if (out.datatype == DataType::kBytes) {
        size_t b = offsets[static_cast<size_t>(elem)], e = offsets[static_cast<size_t>(elem + n)];
        t.data.assign(out.data, b, e - b);
      } else {
        size_t sz = DataTypeSize(out.datatype);
        t.data.assign(out.data, static_cast<size_t>(elem) * sz, static_cast<size_t>(n) * sz);
      }
      elem += n;
      per[k].push_back(std::move(t));
    }
  }
  return per;
}

Result<std::unique_ptr<ModelInstance>> ModelInstance::Create(Options options) {
  std::unique_ptr<ModelInstance> inst(new ModelInstance(std::move(options)));
  std::promise<Status> loaded;
  auto fut = loaded.get_future();
  inst->thread_ = std::thread([p = inst.get(), &loaded] { p->Loop(&loaded); });
  Status s = fut.get();
  if (!s.ok()) {
    inst->thread_.join();
    return s;
  }
  return inst;
}

ModelInstance::~ModelInstance() { Stop(); }

void ModelInstance::Post(Task task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ModelInstance::Run(Batch batch) {
  busy_.fetch_add(1);
  Post(Task{std::move(batch), nullptr});
}

bool ModelInstance::TryClaim() {
  int idle = 0;
  return busy_.compare_exchange_strong(idle, 1);
}

void ModelInstance::RunClaimed(Batch batch) {
  Execute(batch);
  executed_.fetch_add(1);
  busy_.fetch_sub(1);
}

Status ModelInstance::Warmup(const std::vector<Tensor>& sample) {
  std::promise<Status> done;
  auto fut = done.get_future();
  Post(Task{{}, [&](BackendInstance& b) {
              std::vector<LatheTensor> views;
              for (const auto& t : sample) views.push_back(ToLathe(t));
              done.set_value(b.Warmup(views));
            }});
  return fut.get();
}

Json ModelInstance::Describe() {
  std::promise<Json> done;
  auto fut = done.get_future();
  Post(Task{{}, [&](BackendInstance& b) { done.set_value(b.Describe()); }});
  return fut.get();
}

void ModelInstance::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ModelInstance::Loop(std::promise<Status>* loaded) {
  // Loading on this thread keeps per-thread runtime state (thread pools, a CUDA
  // context) on the thread that executes.
  auto b = BackendInstance::Load(*options_.library, options_.spec);
  if (!b.ok()) {
    loaded->set_value(b.status());
    return;
  }
  backend_ = std::move(*b);
  runs_inline_ = backend_->RunsInline();
  loaded->set_value(Status::OK());
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) break;  // stopping, nothing left
    Task t = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    if (t.call) {
      t.call(*backend_);
    } else {
      Execute(t.batch);
      executed_.fetch_add(1);
      busy_.fetch_sub(1);
      if (options_.on_idle) options_.on_idle();
    }
    lock.lock();
  }
  lock.unlock();
  std::lock_guard<std::mutex> exec(exec_mu_);  // a claimed batch may still be running elsewhere
  backend_.reset();                            // unload on this thread
}

void ModelInstance::Execute(Batch& batch) {
  const int64_t start = options_.now_us();
  std::vector<int64_t> rows;
  for (const auto& r : batch) rows.push_back(r->rows);
  // 1. Inputs: one request's as they are, several merged along dim 0.
  std::vector<Tensor> merged;
  if (batch.size() > 1) merged = MergeInputs(batch);
  const std::vector<Tensor>& inputs = batch.size() > 1 ? merged : batch.front()->inputs;
  std::vector<LatheTensor> views;
  views.reserve(inputs.size());
  for (const auto& t : inputs) views.push_back(ToLathe(t));
  // 2. Run the backend (gone when a claimed batch comes after Stop).
  Result<std::vector<Tensor>> out = std::vector<Tensor>();
  {
    std::lock_guard<std::mutex> exec(exec_mu_);
    out = backend_ ? backend_->Execute(views) : Status::Msg(Code::kUnavailable, "serve.stopping");
  }
  const int64_t end = options_.now_us();
  // 3. Split and answer every request.
  Result<std::vector<std::vector<Tensor>>> split =
      out.ok() ? SplitOutputs(std::move(*out), rows)
               : Result<std::vector<std::vector<Tensor>>>(out.status());
  if (options_.on_batch) options_.on_batch(BatchOutcome{BatchRows(batch), end - start, split.ok()});
  if (!split.ok()) {
    spdlog::warn("serve: {} v{} instance {}: {}", options_.spec.model_name,
                 options_.spec.model_version, options_.spec.instance_index,
                 split.status().message());
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    PendingRequest& r = *batch[k];
    InferResult res;
    res.queue_us = start - r.enqueue_us;
    res.compute_us = end - start;
    res.batch_size = static_cast<int>(BatchRows(batch));
    if (split.ok()) {
      res.outputs = std::move((*split)[k]);
    } else {
      res.status = ForClient(split.status());  // the whole of it is in the log (above)
    }
    if (r.done) r.done(std::move(res));
  }
  batch.clear();
}

}  // namespace lathe::serve
