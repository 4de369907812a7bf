#include "common/rpc/refusing_connection.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "common/token.h"

namespace manta::rpc {

std::string RefusingConnection::Consume(std::string_view bytes) {
  std::string out;
  if (done_) return out;
  // The rest of a DATA payload: dropped as it comes.
  const size_t skipped = std::min(skip_, bytes.size());
  skip_ -= skipped;
  bytes.remove_prefix(skipped);
  buffer_.append(bytes);
  size_t at = 0;
  if (!preface_) {
    const auto& preface = http2::kClientPreface;
    if (buffer_.size() < preface.size()) {
      if (buffer_ != preface.substr(0, buffer_.size())) done_ = true;
      return out;
    }
    if (std::string_view(buffer_).substr(0, preface.size()) != preface) {
      done_ = true;
      return out;
    }
    preface_ = true;
    at = preface.size();
  }
  while (!done_ && buffer_.size() - at >= http2::kFrameHeaderSize) {
    const http2::FrameHeader h = http2::ReadFrameHeader(std::string_view(buffer_).substr(at));
    if (h.length > http2::kMaxFrameSize) {
      done_ = true;
      break;
    }
    if (h.type == http2::kData) {  // never kept: skip the payload, here or as it comes
      const size_t here = std::min<size_t>(h.length, buffer_.size() - at - http2::kFrameHeaderSize);
      skip_ = h.length - here;
      at += http2::kFrameHeaderSize + here;
      continue;
    }
    if (buffer_.size() - at < http2::kFrameHeaderSize + h.length) break;
    OnFrame(h, std::string_view(buffer_).substr(at + http2::kFrameHeaderSize, h.length), &out);
    at += http2::kFrameHeaderSize + h.length;
  }
  buffer_.erase(0, at);
  return out;
}

void RefusingConnection::OnFrame(const http2::FrameHeader& h, std::string_view payload, std::string* out) {
  if (block_stream_ != 0 && (h.type != http2::kContinuation || h.stream != block_stream_)) {
    done_ = true;  // a header block was interrupted
    return;
  }
  switch (h.type) {
    case http2::kHeaders: {
      // A new request: a client's streams are odd and only go up.
      std::string_view fragment;
      if (h.stream == 0 || h.stream % 2 == 0 || h.stream <= last_stream_ ||
          !http2::HeaderFragment(h, payload, &fragment)) {
        done_ = true;
        return;
      }
      block_.assign(fragment);
      block_stream_ = h.stream;
      if (h.flags & http2::kEndHeaders) OnRequest(out);
      return;
    }
    case http2::kContinuation:
      if (block_stream_ == 0) {
        done_ = true;
        return;
      }
      block_.append(payload);
      if (h.flags & http2::kEndHeaders) OnRequest(out);
      return;
    case http2::kSettings:
      if ((h.flags & http2::kAck) == 0) http2::AppendFrame(out, http2::kSettings, http2::kAck, 0, {});
      return;
    case http2::kPing:
      if ((h.flags & http2::kAck) == 0 && payload.size() == 8) {
        http2::AppendFrame(out, http2::kPing, http2::kAck, 0, payload);
      }
      return;
    case http2::kGoaway:
      done_ = true;
      return;
    default:  // WINDOW_UPDATE, RST_STREAM, PRIORITY, unknown types
      return;
  }
}

void RefusingConnection::OnRequest(std::string* out) {
  const uint32_t stream = std::exchange(block_stream_, 0);
  std::optional<std::string> authorization;
  const bool decoded = decoder_.Decode(block_, [&](std::string_view name, std::string_view value) {
    if (name == "authorization") authorization = std::string(value);
  });
  block_.clear();
  if (!decoded) {
    done_ = true;
    return;
  }
  if (authorization && TokenMatches(TokenFromAuthorization(*authorization), token_)) {
    // Left unprocessed (the GOAWAY names the stream before it): the client
    // sends it again on a new connection, which goes to gRPC.
    done_ = true;
    return;
  }
  last_stream_ = stream;
  out->append(http2::Unauthenticated(stream, message_));
  if (++answered_ >= kMaxAnswered) done_ = true;
}

std::string RefusingConnection::Goaway() const { return http2::Goaway(last_stream_); }

}  // namespace manta::rpc
