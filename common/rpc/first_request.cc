#include "common/rpc/first_request.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/http2_frames.h"

namespace manta::rpc {

using http2::FrameHeader;
using http2::HeaderDecoder;
using http2::HeaderFragment;
using http2::kClientPreface;
using http2::kContinuation;
using http2::kEndHeaders;
using http2::kFrameHeaderSize;
using http2::kHeaders;
using http2::kMaxFrameSize;
using http2::kPing;
using http2::kPriority;
using http2::kSettings;
using http2::kWindowUpdate;
using http2::ReadFrameHeader;

namespace {

FirstRequest Invalid(std::string why) {
  FirstRequest r;
  r.kind = FirstRequest::kInvalid;
  r.error = std::move(why);
  return r;
}

FirstRequest NeedMore(size_t need) {
  FirstRequest r;
  r.kind = FirstRequest::kNeedMore;
  r.need = need;
  return r;
}

}  // namespace

FirstRequest ParseFirstRequest(std::string_view bytes) {
  const size_t have = bytes.size();
  if (have < kClientPreface.size()) {
    if (bytes != kClientPreface.substr(0, have)) return Invalid("not the HTTP/2 client preface");
    return NeedMore(kClientPreface.size());
  }
  if (bytes.substr(0, kClientPreface.size()) != kClientPreface) return Invalid("not the HTTP/2 client preface");
  size_t at = kClientPreface.size();
  std::string block;  // the first request's header block, across CONTINUATIONs
  uint32_t stream = 0;
  while (true) {
    if (have - at < kFrameHeaderSize) return NeedMore(at + kFrameHeaderSize);
    const FrameHeader f = ReadFrameHeader(bytes.substr(at));
    if (f.length > kMaxFrameSize) return Invalid(absl::StrCat("a frame of ", f.length, " bytes"));
    const size_t end = at + kFrameHeaderSize + f.length;
    if (end > kMaxFirstRequestBytes) return Invalid("the first request's headers are too large");
    if (have < end) return NeedMore(end);
    const std::string_view payload = bytes.substr(at + kFrameHeaderSize, f.length);
    at = end;
    if (stream != 0) {  // inside a header block: only its CONTINUATIONs may follow
      if (f.type != kContinuation || f.stream != stream) return Invalid("a header block was interrupted");
      block.append(payload);
    } else if (f.type == kHeaders) {
      if (f.stream == 0 || f.stream % 2 == 0) return Invalid("HEADERS on a stream a client cannot open");
      std::string_view fragment;
      if (!HeaderFragment(f, payload, &fragment)) return Invalid("a malformed HEADERS frame");
      stream = f.stream;
      block.assign(fragment);
    } else if (f.type == kSettings || f.type == kWindowUpdate || f.type == kPing || f.type == kPriority) {
      continue;
    } else {
      return Invalid(absl::StrCat("frame type ", f.type, " before the first request"));
    }
    if (f.flags & kEndHeaders) break;
  }
  FirstRequest r;
  r.kind = FirstRequest::kHeaders;
  r.stream_id = stream;
  HeaderDecoder decoder;
  const bool decoded = decoder.Decode(block, [&r](std::string_view name, std::string_view value) {
    if (name == "authorization") r.authorization = std::string(value);
    if (name == ":path") r.path = std::string(value);
  });
  if (!decoded) return Invalid("the first request's headers do not decode");
  return r;
}

}  // namespace manta::rpc
