#include "common/http/front_reader.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/http/http_limits.h"

namespace manta::http {
namespace {

constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

std::string RestatedHead(const RequestHead& head, uint64_t content_length, bool json_body) {
  std::string out = absl::StrCat(head.method, " ", head.target, " ", head.version, "\r\n");
  for (const auto& [name, value] : head.headers) {
    if (absl::EqualsIgnoreCase(name, "Content-Length") || absl::EqualsIgnoreCase(name, "Transfer-Encoding") ||
        absl::EqualsIgnoreCase(name, "Connection") || absl::EqualsIgnoreCase(name, "Expect") ||
        (json_body && absl::EqualsIgnoreCase(name, "Content-Type"))) {
      continue;
    }
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  if (json_body) absl::StrAppend(&out, "Content-Type: application/json\r\n");
  absl::StrAppend(&out, "Content-Length: ", content_length, "\r\nConnection: close\r\n\r\n");
  return out;
}

absl::Duration BodyAllowance(const HttpLimits& limits, uint64_t bytes) {
  return limits.body_grace + absl::Seconds(static_cast<double>(bytes) / limits.min_body_bytes_per_second);
}

FrontReader::FrontReader(const FrontPolicy* front, const HttpLimits* limits, std::string peer, BodyBudget* budget)
    : front_(front), limits_(limits), peer_(std::move(peer)), budget_(budget) {}

FrontReader::~FrontReader() { ReleaseBudget(); }

void FrontReader::ReleaseBudget() {
  budget_->Release(reserved_);
  reserved_ = 0;
}

void FrontReader::Abandon() {
  phase_ = Phase::kDone;
  ReleaseBudget();
  chunked_.reset();
  bytes_ = std::string();
}

std::string FrontReader::Refusal(int status, const std::string& message) const {
  FrontVerdict v;
  v.status = status;
  v.message = message;
  return RefusalResponse(v, front_->json_errors);
}

FrontReader::Step FrontReader::Refuse(const FrontVerdict& verdict) {
  Abandon();
  Step s;
  s.kind = Kind::kRefuse;
  s.bytes = RefusalResponse(verdict, front_->json_errors);
  return s;
}

FrontReader::Step FrontReader::Refuse(int status, const std::string& message) {
  FrontVerdict v;
  v.status = status;
  v.message = message;
  return Refuse(v);
}

FrontReader::Step FrontReader::HandOff(uint64_t length, const std::string& body) {
  phase_ = Phase::kDone;
  ReleaseBudget();
  Step s;
  s.kind = Kind::kHandOff;
  s.bytes = RestatedHead(head_, length, verdict_.json_body) + body;
  s.is_public = verdict_.is_public;
  return s;
}

FrontReader::Step FrontReader::Feed(std::string_view bytes) {
  switch (phase_) {
    case Phase::kDone:
      return Step{};  // past the request: what follows is never read
    case Phase::kBody:
      return OnBody(bytes);
    case Phase::kHead:
      break;
  }
  // The end of the head may straddle this read and the last.
  size_t from = bytes_.size() < 3 ? 0 : bytes_.size() - 3;
  bytes_.append(bytes);
  size_t end = bytes_.find("\r\n\r\n", from);
  if (end == std::string::npos) {
    if (bytes_.size() <= limits_->max_header_bytes) return Step{};
    return Refuse(431, "the request's headers are too large");
  }
  if (end + 4 > limits_->max_header_bytes) return Refuse(431, "the request's headers are too large");
  std::string rest = bytes_.substr(end + 4);
  bytes_.resize(end + 4);
  return OnHead(rest);
}

FrontReader::Step FrontReader::OnHead(std::string_view body_start) {
  absl::StatusOr<RequestHead> head = ParseRequestHead(bytes_);
  if (!head.ok()) return Refuse(HeadErrorStatus(head.status()), std::string(head.status().message()));
  head_ = *std::move(head);
  head_.peer_ip = peer_;
  verdict_ = CheckFront(*front_, head_);
  if (!verdict_.accepted()) return Refuse(verdict_);
  bytes_.clear();
  const uint64_t length = head_.framing == BodyFraming::kLength ? head_.content_length : 0;
  if (head_.framing == BodyFraming::kNone || (head_.framing == BodyFraming::kLength && length == 0)) {
    return HandOff(0, "");
  }
  const std::optional<std::string_view> expect = head_.Header("Expect");
  const bool wants_continue = expect.has_value() && absl::EqualsIgnoreCase(AbslView(*expect), "100-continue");
  if (head_.framing == BodyFraming::kLength && length > limits_->max_loop_body_bytes) {
    // A token holder's upload (a public route takes no more than the loop
    // reads): its handling thread reads the rest, capped at the length.
    if (verdict_.is_public) return Refuse(413, "the body is larger than this route takes");
    phase_ = Phase::kDone;
    Step s;
    s.kind = Kind::kUpload;
    uint64_t have = std::min<uint64_t>(body_start.size(), length);
    if (wants_continue) s.interim = kContinue;
    s.bytes = RestatedHead(head_, length, verdict_.json_body) + std::string(body_start.substr(0, have));
    s.left = length - have;
    s.body_time = BodyAllowance(*limits_, length);
    return s;
  }
  // Read here, whole: reserve what it may take of the loop's budget.
  const uint64_t reserve = length > 0 ? length : std::min<uint64_t>(verdict_.max_body, limits_->max_loop_body_bytes);
  if (!budget_->Reserve(reserve)) return Refuse(503, "the server is reading too many request bodies; try again");
  reserved_ = reserve;
  phase_ = Phase::kBody;
  body_time_ = BodyAllowance(*limits_, reserve);
  if (head_.framing == BodyFraming::kChunked) {
    chunked_ = std::make_unique<ChunkedDecoder>(std::min<uint64_t>(verdict_.max_body, limits_->max_loop_body_bytes));
  }
  Step s = body_start.empty() ? Step{} : OnBody(body_start);
  if (s.kind == Kind::kMore && wants_continue) s.interim = kContinue;
  return s;
}

FrontReader::Step FrontReader::OnBody(std::string_view bytes) {
  if (chunked_) {
    switch (chunked_->Feed(bytes)) {
      case ChunkedDecoder::State::kMore:
        return Step{};
      case ChunkedDecoder::State::kTooLarge:
        return Refuse(413, absl::StrCat("the chunked body is larger than the ",
                                        std::min<uint64_t>(verdict_.max_body, limits_->max_loop_body_bytes),
                                        " bytes this route takes"));
      case ChunkedDecoder::State::kMalformed:
        return Refuse(400, "malformed chunked body");
      case ChunkedDecoder::State::kDone: {
        std::string body = chunked_->TakeBody();
        return HandOff(body.size(), body);
      }
    }
  }
  const uint64_t length = head_.content_length;
  bytes_.append(bytes.substr(0, static_cast<size_t>(std::min<uint64_t>(bytes.size(), length - bytes_.size()))));
  if (bytes_.size() < length) return Step{};
  return HandOff(length, bytes_);
}

}  // namespace manta::http
