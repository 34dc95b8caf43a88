// GET /api/v1/runs/{run}/logs: the run's log read in bounded chunks
// (run/log_reader.h) and streamed, plain or as server-sent events. The values
// of the secrets the run was given are shown as *** (run/secret_mask.h), in
// whatever the program printed, to its owner as to an admin.
#include <spdlog/spdlog.h>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/run/log_reader.h"

namespace lathe::api {
namespace {

constexpr int kLogPollMs = 100;

// nlohmann refuses invalid UTF-8; a log is whatever the program printed.
std::string LogEvent(std::string_view event, const Json& data) {
  return net::SseEvent(event, data.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

void ApiServer::GetRunLogs(ApiCall& call) {
  auto r = daemon_.Access(call.caller, call.Param("run"), daemon::AccessAction::kRead);
  if (!r.ok()) return call.Reply(r.status());
  Status s = RouteLogs(call.req, *r, call.auth, Truthy(call.req.QueryParam("follow")), call.res);
  if (!s.ok()) call.Reply(s);
}

// {lines, bytes}: what a log viewer needs to size itself before it pages.
void ApiServer::GetRunLogStats(ApiCall& call) {
  auto r = daemon_.Access(call.caller, call.Param("run"), daemon::AccessAction::kRead);
  if (!r.ok()) return call.Reply(r.status());
  Result<run::LogStats> st = Status::Internal("not read");
  Status read = os::WithAccess(daemon_.LogAccess(*r), [&] {
    st = run::CountLogLines(daemon_.LogPath(*r));
    return Status::OK();
  });
  if (!read.ok()) return call.Reply(read);
  if (!st.ok()) return call.Reply(st.status());
  call.Reply(Json{{"run", r->id},
                  {"lines", st->lines},
                  {"bytes", st->bytes},
                  {"finished", !run::IsActive(r->state) && r->state != run::RunState::kQueued}});
}

Status ApiServer::RouteLogs(const net::HttpRequest& req, const state::RunRecord& run,
                            const Authenticated& auth, bool follow,
                            std::unique_ptr<net::Responder>& res) {
  const daemon::Caller& caller = auth.caller;
  ASSIGN_OR_RETURN(
      run::LogQuery query,
      run::ParseLogQuery([&](std::string_view name) { return req.QueryParam(name); }, follow));
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    int& readers = log_readers_[caller.uid];
    if (readers >= kMaxLogReadersPerUser) {
      return Status::Msg(Code::kResourceExhausted, "logs.too_many_readers",
                         {{"user", caller.user}, {"max", std::to_string(kMaxLogReadersPerUser)}});
    }
    ++readers;
  }
  auto mask = std::make_shared<const run::SecretMask>(
      daemon_.secrets().Values(run.uid, run::SecretNames(run.spec)));
  std::shared_ptr<net::Responder> responder(res.release());
  StartStreamThread([this, responder, query, mask, path = daemon_.LogPath(run), id = run.id, follow,
                     uid = caller.uid, auth, as = daemon_.LogAccess(run)] {
    // The whole stream as the log's reader (a pool run's: its user); the
    // thread is this stream's alone.
    Status st = os::WithAccess(as, [&] {
      ServeLogs(id, path, query, follow, *mask, auth, *responder);
      return Status::OK();
    });
    if (!st.ok()) responder->Send(ErrorResponse(st));
    std::lock_guard<std::mutex> lock(log_mu_);
    if (--log_readers_[uid] == 0) log_readers_.erase(uid);
  });
  return Status::OK();
}

// Runs on a stream thread of its own: finding where the answer starts may
// read much of the log.
void ApiServer::ServeLogs(const std::string& run_id, const std::string& path,
                          const run::LogQuery& query, bool follow, const run::SecretMask& mask,
                          const Authenticated& auth, net::Responder& res) {
  auto reader = run::LogReader::Open(path, query);
  if (!reader.ok()) {
    spdlog::warn("logs of {}: {}", run_id, reader.status().ToString());
    return res.Send(ErrorResponse(reader.status()));
  }
  if (follow) {
    std::shared_ptr<net::ResponseStream> s = net::StartEventStream(res);
    return FollowLogs(run_id, **reader, mask, auth, *s);
  }
  net::Headers headers = {{"Cache-Control", "no-cache"}};
  if (auto next = (*reader)->next_offset())
    headers.push_back({"X-Lathe-Next-Offset", std::to_string(*next)});
  std::shared_ptr<net::ResponseStream> s =
      res.StartStream(200, "text/plain; charset=utf-8", headers);
  // Chunks are whole lines, and a value is masked line by line.
  Status st = (*reader)->Read([&](std::string_view chunk) {
    if (stopping_) return false;
    return mask.empty() ? s->Write(chunk) : s->Write(mask.Apply(chunk));
  });
  if (!st.ok()) spdlog::warn("logs of {}: {}", run_id, st.ToString());
  s->Close();
}

// Server-sent events, one `log` event per line, gathered into writes of about
// kLogChunkBytes; `end` once the run has finished and its log is read.
void ApiServer::FollowLogs(const std::string& run_id, run::LogReader& reader,
                           const run::SecretMask& mask, const Authenticated& auth,
                           net::ResponseStream& s) {
  std::string out;
  bool gone = false;
  KeepAlive keep_alive(*auth_, auth, StillReads(auth, run_id));
  auto flush = [&] {
    if (!out.empty() && !s.Write(out)) gone = true;
    out.clear();
    return !gone;
  };
  while (!stopping_ && !s.ClientGone()) {
    bool finished = daemon_.IsFinished(run_id);  // before reading: no line is missed
    auto more = reader.Poll([&](std::string_view line) {
      out += LogEvent("log", Json{{"line", mask.empty() ? std::string(line) : mask.Apply(line)}});
      return out.size() < run::kLogChunkBytes || (flush() && !stopping_);
    });
    if (!more.ok()) spdlog::warn("logs of {}: {}", run_id, more.status().ToString());
    if (!flush() || !more.ok() || !*more) break;
    if (finished) {
      s.Write(LogEvent("end", Json{{"run", run_id}}));
      break;
    }
    if (!keep_alive.Tick(s)) break;
    daemon_.WaitForChange(kLogPollMs);
  }
  s.Close();
}

}  // namespace lathe::api
