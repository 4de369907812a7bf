#include "common/rpc/http2_frames.h"

#include <nghttp2/nghttp2.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace manta::rpc::http2 {
namespace {

void AppendInt(std::string* out, int prefix_bits, size_t value) {
  const size_t max_prefix = (size_t{1} << prefix_bits) - 1;
  if (value < max_prefix) {
    out->push_back(static_cast<char>(value));
    return;
  }
  out->push_back(static_cast<char>(max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// A literal header field without indexing, new name, no Huffman coding
// (RFC 7541, 6.2.2): it leaves the client's HPACK table as it was.
void AppendHeader(std::string* block, std::string_view name, std::string_view value) {
  block->push_back('\0');
  AppendInt(block, 7, name.size());
  block->append(name);
  AppendInt(block, 7, value.size());
  block->append(value);
}

// grpc-message is percent-encoded outside printable ASCII (and '%' itself).
std::string PercentEncode(std::string_view message) {
  std::string out;
  for (unsigned char c : message) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%%%02X", c));
    }
  }
  return out;
}

std::string U32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

}  // namespace

FrameHeader ReadFrameHeader(std::string_view b) {
  auto byte = [&](size_t i) { return uint32_t{static_cast<uint8_t>(b[i])}; };
  FrameHeader h;
  h.length = (byte(0) << 16) | (byte(1) << 8) | byte(2);
  h.type = static_cast<uint8_t>(b[3]);
  h.flags = static_cast<uint8_t>(b[4]);
  h.stream = ((byte(5) << 24) | (byte(6) << 16) | (byte(7) << 8) | byte(8)) & 0x7fffffffu;
  return h;
}

bool HeaderFragment(const FrameHeader& f, std::string_view payload, std::string_view* fragment) {
  std::string_view p = payload;
  size_t pad = 0;
  if (f.flags & kPadded) {
    if (p.empty()) return false;
    pad = static_cast<uint8_t>(p[0]);
    p.remove_prefix(1);
  }
  if (f.flags & kPriorityFlag) {
    if (p.size() < 5) return false;
    p.remove_prefix(5);
  }
  if (pad > p.size()) return false;
  *fragment = p.substr(0, p.size() - pad);
  return true;
}

HeaderDecoder::HeaderDecoder() {
  if (nghttp2_hd_inflate_new(&inflater_) != 0) inflater_ = nullptr;
}

HeaderDecoder::~HeaderDecoder() {
  if (inflater_ != nullptr) nghttp2_hd_inflate_del(inflater_);
}

bool HeaderDecoder::Decode(std::string_view block, const Emit& emit) {
  if (inflater_ == nullptr) return false;
  auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  while (true) {
    nghttp2_nv nv;
    int flags = 0;
    ssize_t used = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, left, /*in_final=*/1);
    if (used < 0) {
      nghttp2_hd_inflate_del(inflater_);
      inflater_ = nullptr;
      return false;
    }
    in += used;
    left -= static_cast<size_t>(used);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      emit(std::string_view(reinterpret_cast<const char*>(nv.name), nv.namelen),
           std::string_view(reinterpret_cast<const char*>(nv.value), nv.valuelen));
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater_);
      return true;
    }
    if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) return false;
  }
}

void AppendFrame(std::string* out, uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  const size_t n = payload.size();
  out->push_back(static_cast<char>(n >> 16));
  out->push_back(static_cast<char>(n >> 8));
  out->push_back(static_cast<char>(n));
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  out->append(U32(stream & 0x7fffffffu));
  out->append(payload);
}

std::string ServerPreface() {
  std::string out;
  AppendFrame(&out, kSettings, 0, 0, {});
  return out;
}

std::string Unauthenticated(uint32_t stream, std::string_view message) {
  std::string block;
  AppendHeader(&block, ":status", "200");
  AppendHeader(&block, "content-type", "application/grpc");
  AppendHeader(&block, "grpc-status", "16");
  AppendHeader(&block, "grpc-message", PercentEncode(message));
  std::string out;
  AppendFrame(&out, kHeaders, kEndStream | kEndHeaders, stream, block);
  AppendFrame(&out, kRstStream, 0, stream, U32(0));
  return out;
}

std::string Goaway(uint32_t last_stream) {
  std::string out;
  AppendFrame(&out, kGoaway, 0, 0, U32(last_stream & 0x7fffffffu) + U32(0));
  return out;
}

}  // namespace manta::rpc::http2
