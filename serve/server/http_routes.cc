#include "serve/server/http_routes.h"

#include <deque>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace manta::serve {
namespace {

constexpr char kJson[] = "application/json";

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
      return 503;
    default:
      return 500;
  }
}

void Reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, kJson);
}

// What a request's callbacks (on the engine thread) hand the HTTP thread.
struct Exchange {
  absl::Mutex mu;
  std::deque<std::string> pieces ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  std::atomic<bool> gone{false};  // the client went away
};

std::shared_ptr<Exchange> Start(ServingLoop* loop, const GenerateBody& body) {
  auto ex = std::make_shared<Exchange>();
  loop->Generate(
      body,
      [ex](const std::string& piece) {
        absl::MutexLock lock(&ex->mu);
        ex->pieces.push_back(piece);
      },
      [ex](const absl::Status& s) {
        absl::MutexLock lock(&ex->mu);
        ex->done = true;
        ex->status = s;
      },
      [ex] { return ex->gone.load(); });
  return ex;
}

// How often a request waiting for its whole answer looks whether its client
// hung up (then the batcher drops it, instead of decoding for no one).
constexpr absl::Duration kGonePoll = absl::Milliseconds(100);

void Whole(const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
  absl::MutexLock lock(&ex->mu);
  while (!ex->mu.AwaitWithTimeout(absl::Condition(&ex->done), kGonePoll)) {
    if (!ex->gone.load() && http::GatedHttpServer::ClientGone()) ex->gone = true;
  }
  if (!ex->status.ok()) return Reply(res, HttpStatus(ex->status), ErrorJson(ex->status.message()));
  std::string text;
  for (const std::string& p : ex->pieces) text += p;
  Reply(res, 200, ResponseJson(text));
}

void Streamed(const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ex](size_t, httplib::DataSink& sink) {
        std::deque<std::string> ready;
        bool done;
        absl::Status status;
        {
          absl::MutexLock lock(&ex->mu);
          auto has = [&ex]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu) { return ex->done || !ex->pieces.empty(); };
          ex->mu.AwaitWithTimeout(absl::Condition(&has), absl::Seconds(1));
          ready.swap(ex->pieces);
          done = ex->done;
          status = ex->status;
        }
        for (const std::string& p : ready) {
          const std::string event = StreamEvent(p);
          if (!sink.write(event.data(), event.size())) {
            ex->gone = true;
            return false;
          }
        }
        if (!sink.is_writable()) {
          ex->gone = true;
          return false;
        }
        if (done) {
          // An error after the stream began: an error event, then the end.
          const std::string tail =
              status.ok() ? std::string(kStreamDone) : absl::StrCat("data: ", ErrorJson(status.message()), "\n\n");
          sink.write(tail.data(), tail.size());
          sink.done();
        }
        return true;
      },
      [ex](bool) { ex->gone = true; });
}

}  // namespace

void InstallRoutes(http::GatedHttpServer* server, ServingLoop* loop, const train::Tokenizer* tokenizer,
                   const RouteOptions& options) {
  // The token and the body's size are checked before the body is read.
  http::FrontPolicy front;
  front.routes = {
      {"GET", "/healthcheck"},
      {.method = "POST", .path = "/generate", .max_body = options.max_body_bytes, .chunked = true, .json_body = true}};
  if (!options.token.empty()) {
    front.authenticate = [token = options.token](const http::RequestHead& head) {
      return http::BearerCredential(head, token);
    };
  }
  front.json_errors = true;
  server->SetFront(std::move(front));
  // What httplib itself refuses (a malformed head it reads again) is JSON too.
  server->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) res.set_content(ErrorJson(absl::StrCat("HTTP status ", res.status)), kJson);
  });
  server->Get("/healthcheck", [loop](const httplib::Request&, httplib::Response& res) {
    if (loop->healthy()) return Reply(res, 200, R"({"status":"ok"})");
    Reply(res, 503, ErrorJson(loop->failed() ? "the serving group failed" : "warming up"));
  });
  server->Post("/generate", [loop, tokenizer, options](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<GenerateBody> body = ParseGenerateBody(req.body, options.default_max_tokens);
    if (!body.ok()) return Reply(res, 400, ErrorJson(body.status().message()));
    const size_t prompt_tokens = tokenizer->Encode(body->prompt).size();
    if (static_cast<int64_t>(prompt_tokens) > options.max_prompt_tokens) {
      return Reply(res, 400,
                   ErrorJson(absl::StrCat("the prompt is ", prompt_tokens, " tokens; the server takes ",
                                          options.max_prompt_tokens, " (max_prefill_predict_length)")));
    }
    if (!loop->healthy()) {
      return Reply(res, 503, ErrorJson(loop->failed() ? "the serving group failed" : "warming up"));
    }
    std::shared_ptr<Exchange> ex = Start(loop, *body);
    if (!body->stream) return Whole(ex, res);
    absl::Status refused;
    {
      // A request refused before its first token gets a plain error reply.
      absl::MutexLock lock(&ex->mu);
      auto started = [&ex]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu) { return ex->done || !ex->pieces.empty(); };
      ex->mu.Await(absl::Condition(&started));
      if (ex->done && ex->pieces.empty()) refused = ex->status;
    }
    if (!refused.ok()) return Reply(res, HttpStatus(refused), ErrorJson(refused.message()));
    Streamed(ex, res);
  });
}

}  // namespace manta::serve
