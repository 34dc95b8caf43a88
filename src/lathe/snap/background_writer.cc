#include "lathe/snap/background_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace lathe::snap {
namespace {

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// os::PwriteFull, but a direct write the filesystem refuses (EINVAL, an IoError
// from ErrnoStatus) is written again through the page cache, once.
Status WriteAt(int fd, const char* p, size_t n, uint64_t offset, const std::string& path) {
  Status st = os::PwriteFull(fd, p, n, offset, path);
  if (st.code() != Code::kIoError) return st;
  if (!os::IsDirectIo(fd) || !os::SetDirectIo(fd, false)) return st;
  return os::PwriteFull(fd, p, n, offset, path);
}

}  // namespace

BackgroundWriter::BackgroundWriter() : BackgroundWriter(Options{}) {}

BackgroundWriter::BackgroundWriter(Options opts) : opts_(opts) {
  opts_.buffer_bytes = RoundUp(std::max<size_t>(opts_.buffer_bytes, kAlign), kAlign);
  opts_.buffers = std::max(opts_.buffers, 2);
}

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status BackgroundWriter::Open(const std::string& path, unsigned mode) {
  if (fd_.valid()) return Status::Internal("BackgroundWriter::Open with a file still open");
  RETURN_IF_ERROR(FirstError());
  ASSIGN_OR_RETURN(fd_, os::Fd::Open(path, O_WRONLY | O_CREAT | O_EXCL, mode));
  path_ = path;
  offset_ = 0;
  direct_ = false;
  if (opts_.direct) {
    direct_ = os::SetDirectIo(fd_.get(), true);
  }
  return Status::OK();
}

Status BackgroundWriter::Append(const void* data, size_t n) {
  if (!fd_.valid()) return Status::Internal("BackgroundWriter::Append without an open file");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (cur_ == nullptr) RETURN_IF_ERROR(TakeBuffer());
    size_t take = std::min(n, opts_.buffer_bytes - fill_);
    std::memcpy(cur_ + fill_, p, take);
    fill_ += take;
    appended_ += take;
    p += take;
    n -= take;
    if (fill_ == opts_.buffer_bytes) RETURN_IF_ERROR(Flush(false));
  }
  return Status::OK();
}

Status BackgroundWriter::CloseAsync() {
  if (!fd_.valid()) return Status::Internal("BackgroundWriter::CloseAsync without an open file");
  return Flush(true);
}

Status BackgroundWriter::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return queue_.empty() && !busy_; });
  return error_;
}

Status BackgroundWriter::FirstError() {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

Status BackgroundWriter::TakeBuffer() {
  std::unique_lock<std::mutex> l(mu_);
  if (free_.empty() && storage_.size() < static_cast<size_t>(opts_.buffers)) {
    void* p = std::aligned_alloc(kAlign, opts_.buffer_bytes);
    if (p == nullptr) return Status::ResourceExhausted("no memory for a write buffer");
    storage_.emplace_back(static_cast<char*>(p), &std::free);
    free_.push_back(static_cast<char*>(p));
  }
  cv_.wait(l, [this] { return !free_.empty(); });
  cur_ = free_.back();
  free_.pop_back();
  fill_ = 0;
  return error_;
}

Status BackgroundWriter::Flush(bool last) {
  Job job;
  job.fd = fd_.get();
  job.offset = offset_;
  job.buf = cur_;
  job.len = fill_;
  job.path = path_;
  if (last) {
    job.last = true;
    job.final_size = offset_ + fill_;
    if (direct_ && cur_ != nullptr) {  // a direct write covers whole blocks; truncated after
      job.len = RoundUp(fill_, kAlign);
      std::memset(cur_ + fill_, 0, job.len - fill_);
    }
    job.owned = std::move(fd_);
  }
  offset_ += fill_;
  cur_ = nullptr;
  fill_ = 0;
  std::lock_guard<std::mutex> l(mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return error_;
}

void BackgroundWriter::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    bool failed = !error_.ok();
    l.unlock();
    // After a failure the rest is not written, but buffers come back and
    // descriptors are closed.
    Status st = failed ? Status::OK() : Run(&job);
    if (job.last) job.owned = os::Fd();
    l.lock();
    busy_ = false;
    if (job.buf != nullptr) free_.push_back(job.buf);
    if (!st.ok() && error_.ok()) error_ = st;
    cv_.notify_all();
  }
}

Status BackgroundWriter::Run(Job* job) {
  if (job->len > 0) RETURN_IF_ERROR(WriteAt(job->fd, job->buf, job->len, job->offset, job->path));
  written_ += job->len;
  if (!job->last) return Status::OK();
  if (job->offset + job->len != job->final_size) {
    RETURN_IF_ERROR(os::Truncate(job->fd, job->final_size, job->path));
  }
  RETURN_IF_ERROR(os::Fsync(job->fd, job->path));
  return job->owned.Close(job->path);
}

}  // namespace lathe::snap
