#include "common/http/request_head.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/utf8.h"

namespace manta::http {
namespace {

// The status payload that carries the HTTP status of a refused head.
constexpr char kStatusPayload[] = "manta.http.status";

absl::Status Refuse(int status, const std::string& why) {
  absl::Status s = status >= 500 || status == 415 ? absl::UnimplementedError(why) : absl::InvalidArgumentError(why);
  s.SetPayload(kStatusPayload, absl::Cord(std::to_string(status)));
  return s;
}

// RFC 9110 5.6.2: the characters of a token (a method, a header name).
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar); }

// A header value: visible characters, spaces and tabs, and bytes of 0x80
// and above (obs-text); no other control character.
bool IsFieldValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

absl::Status ParseRequestLine(std::string_view line, RequestHead* head) {
  std::vector<std::string_view> parts;
  for (absl::string_view part : absl::StrSplit(AbslView(line), ' ')) parts.push_back(StdView(part));
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) {
    return Refuse(400, absl::StrCat("malformed request line '", PrintableAscii(line, 120), "'"));
  }
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
    return Refuse(400, absl::StrCat("unsupported HTTP version '", PrintableAscii(parts[2], 20), "'"));
  }
  if (parts[1][0] != '/' || !std::all_of(parts[1].begin(), parts[1].end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
      })) {
    return Refuse(400, absl::StrCat("malformed request target '", PrintableAscii(parts[1], 120), "'"));
  }
  head->method = std::string(parts[0]);
  head->target = std::string(parts[1]);
  head->path = head->target.substr(0, head->target.find('?'));
  head->version = std::string(parts[2]);
  return absl::OkStatus();
}

absl::Status ParseFraming(RequestHead* head) {
  std::optional<uint64_t> length;
  int encodings = 0;
  for (const auto& [name, value] : head->headers) {
    if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      uint64_t n = 0;
      if (value.empty() || !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) || value.size() > 18 ||
          !absl::SimpleAtoi(value, &n)) {
        return Refuse(400, absl::StrCat("invalid Content-Length '", PrintableAscii(value, 40), "'"));
      }
      if (length.has_value() && *length != n) return Refuse(400, "conflicting Content-Length headers");
      length = n;
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (++encodings > 1 || !absl::EqualsIgnoreCase(value, "chunked")) {
        return Refuse(501, absl::StrCat("unsupported Transfer-Encoding '", PrintableAscii(value, 40),
                                        "': send a Content-Length (or plain chunked)"));
      }
    } else if (absl::EqualsIgnoreCase(name, "Content-Encoding") && !absl::EqualsIgnoreCase(value, "identity")) {
      return Refuse(415, absl::StrCat("unsupported Content-Encoding '", PrintableAscii(value, 40),
                                      "': send the body uncompressed"));
    }
  }
  if (length.has_value() && encodings > 0) {
    return Refuse(400, "a request may not carry both Content-Length and Transfer-Encoding");
  }
  if (encodings > 0) {
    head->framing = BodyFraming::kChunked;
  } else if (length.has_value()) {
    head->framing = BodyFraming::kLength;
    head->content_length = *length;
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string_view> RequestHead::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (absl::EqualsIgnoreCase(n, AbslView(name))) return std::string_view(v);
  }
  return std::nullopt;
}

absl::StatusOr<RequestHead> ParseRequestHead(std::string_view bytes) {
  if (bytes.size() < 4 || bytes.substr(bytes.size() - 4) != "\r\n\r\n") {
    return Refuse(400, "the request head does not end in a blank line");
  }
  bytes.remove_suffix(4);
  RequestHead head;
  bool first = true;
  for (absl::string_view piece : absl::StrSplit(AbslView(bytes), "\r\n")) {
    const std::string_view line = StdView(piece);
    if (first) {
      first = false;
      if (absl::Status s = ParseRequestLine(line, &head); !s.ok()) return s;
      continue;
    }
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
      return Refuse(400, "folded header lines are not accepted");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refuse(400, absl::StrCat("malformed header line '", PrintableAscii(line, 80), "'"));
    }
    std::string_view value = StdView(absl::StripAsciiWhitespace(AbslView(line.substr(colon + 1))));
    if (!IsFieldValue(value)) {
      return Refuse(400,
                    absl::StrCat("header ", PrintableAscii(line.substr(0, colon), 40), " holds a control character"));
    }
    head.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  if (absl::Status s = ParseFraming(&head); !s.ok()) return s;
  return head;
}

int HeadErrorStatus(const absl::Status& error) {
  auto status = error.GetPayload(kStatusPayload);
  int code = 0;
  if (status.has_value() && absl::SimpleAtoi(std::string(*status), &code)) return code;
  return 400;
}

ChunkedDecoder::State ChunkedDecoder::Feed(std::string_view bytes) {
  while (!bytes.empty() && state_ == State::kMore) {
    switch (part_) {
      case Part::kSize:
      case Part::kTrailer: {
        size_t nl = bytes.find('\n');
        line_.append(bytes.substr(0, nl));
        if (line_.size() > 4096) return Fail(State::kMalformed);
        if (nl == std::string_view::npos) return state_;
        bytes.remove_prefix(nl + 1);
        if (line_.empty() || line_.back() != '\r') return Fail(State::kMalformed);
        line_.pop_back();
        if (part_ == Part::kTrailer) {
          trailer_bytes_ += line_.size();
          if (trailer_bytes_ > 8192) return Fail(State::kMalformed);
          if (line_.empty()) state_ = State::kDone;  // the blank line after the trailers
          line_.clear();
          continue;
        }
        // "1a;ext=x": the size in hex, extensions ignored.
        std::string_view size = std::string_view(line_).substr(0, line_.find(';'));
        size = StdView(absl::StripAsciiWhitespace(AbslView(size)));
        uint64_t n = 0;
        if (size.empty() || size.size() > 15 || !std::all_of(size.begin(), size.end(), absl::ascii_isxdigit) ||
            !absl::SimpleHexAtoi(AbslView(size), &n)) {
          return Fail(State::kMalformed);
        }
        line_.clear();
        if (n == 0) {
          part_ = Part::kTrailer;
        } else if (n > max_bytes_ - body_.size()) {
          return Fail(State::kTooLarge);
        } else {
          chunk_left_ = n;
          part_ = Part::kData;
        }
        break;
      }
      case Part::kData: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(chunk_left_, bytes.size()));
        body_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        chunk_left_ -= take;
        if (chunk_left_ == 0) part_ = Part::kDataEnd;
        break;
      }
      case Part::kDataEnd: {
        size_t take = std::min(bytes.size(), 2 - line_.size());
        line_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        if (line_.size() < 2) return state_;
        if (line_ != "\r\n") return Fail(State::kMalformed);
        line_.clear();
        part_ = Part::kSize;
        break;
      }
    }
  }
  excess_ += bytes.size();
  return state_;
}

}  // namespace manta::http
