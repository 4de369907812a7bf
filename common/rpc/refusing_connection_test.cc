#include "common/rpc/refusing_connection.h"

#include <string>
#include <vector>

#include "common/rpc/http2_frames.h"
#include "common/rpc/http2_test_frames.h"
#include "gtest/gtest.h"

namespace manta::rpc {
namespace {

using testing::Block;
using testing::Frame;

struct Parsed {
  http2::FrameHeader header;
  std::string payload;
};

std::vector<Parsed> Frames(std::string_view bytes) {
  std::vector<Parsed> out;
  while (bytes.size() >= http2::kFrameHeaderSize) {
    http2::FrameHeader h = http2::ReadFrameHeader(bytes);
    out.push_back({h, std::string(bytes.substr(http2::kFrameHeaderSize, h.length))});
    bytes.remove_prefix(http2::kFrameHeaderSize + h.length);
  }
  EXPECT_TRUE(bytes.empty());
  return out;
}

TEST(Http2FramesTest, TheRefusalIsATrailersOnlyAnswerThenAReset) {
  auto frames = Frames(http2::Unauthenticated(5, "wrong token \xe2\x9c\x97 100%"));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].header.type, http2::kHeaders);
  EXPECT_EQ(frames[0].header.flags, http2::kEndStream | http2::kEndHeaders);
  EXPECT_EQ(frames[0].header.stream, 5u);
  EXPECT_NE(frames[0].payload.find("grpc-status\x02"
                                   "16"),
            std::string::npos);
  EXPECT_NE(frames[0].payload.find("wrong token %E2%9C%97 100%25"), std::string::npos);
  EXPECT_EQ(frames[1].header.type, http2::kRstStream);
  EXPECT_EQ(frames[1].header.stream, 5u);
  EXPECT_EQ(frames[1].payload, std::string(4, '\0'));  // NO_ERROR
  auto goaway = Frames(http2::Goaway(7));
  ASSERT_EQ(goaway.size(), 1u);
  EXPECT_EQ(goaway[0].header.type, http2::kGoaway);
  EXPECT_EQ(goaway[0].payload, std::string("\0\0\0\x07\0\0\0\0", 8));
  EXPECT_EQ(http2::ServerPreface(), std::string("\0\0\0\x04\0\0\0\0\0", 9));
}

TEST(RefusingConnectionTest, EveryRequestIsRefusedAndBodiesAreDroppedAsTheyCome) {
  const std::string block = Block({{":path", "/a/b"}, {"authorization", "Bearer wrong"}});
  std::string in = std::string(http2::kClientPreface) + Frame(http2::kSettings, 0, 0, "") +
                   Frame(http2::kHeaders, http2::kEndHeaders, 1, block) +
                   Frame(http2::kData, 0, 1, std::string(10000, 'x')) + Frame(http2::kPing, 0, 0, "12345678") +
                   Frame(http2::kHeaders, 0, 3, block.substr(0, 5)) +
                   Frame(http2::kContinuation, http2::kEndHeaders, 3, block.substr(5));
  // Fed in pieces of every size, the answer is the same.
  for (size_t piece : {in.size(), size_t{1}, size_t{7}, size_t{4096}}) {
    RefusingConnection fresh("missing cluster token", "tok");
    std::string out;
    for (size_t at = 0; at < in.size(); at += piece) out += fresh.Consume(std::string_view(in).substr(at, piece));
    auto frames = Frames(out);
    ASSERT_EQ(frames.size(), 6u) << piece;
    EXPECT_EQ(frames[0].header.type, http2::kSettings);
    EXPECT_EQ(frames[0].header.flags, http2::kAck);
    EXPECT_EQ(frames[1].header.stream, 1u);
    EXPECT_EQ(frames[2].header.type, http2::kRstStream);
    EXPECT_EQ(frames[3].header.type, http2::kPing);
    EXPECT_EQ(frames[3].header.flags, http2::kAck);
    EXPECT_EQ(frames[3].payload, "12345678");
    EXPECT_EQ(frames[4].header.stream, 3u);
    EXPECT_EQ(fresh.answered(), 2);
    EXPECT_FALSE(fresh.done());
  }
  // A DATA frame's payload is never held, whatever its size.
  RefusingConnection big("x", "tok");
  big.Consume(std::string(http2::kClientPreface) + Frame(http2::kHeaders, http2::kEndHeaders, 1, block));
  std::string data = Frame(http2::kData, 0, 1, std::string(16384, 'y'));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(big.Consume(data).empty());
  EXPECT_FALSE(big.done());
  EXPECT_EQ(Frames(big.Goaway())[0].payload.substr(0, 4), std::string("\0\0\0\x01", 4));
}

TEST(RefusingConnectionTest, TheConnectionEndsOnGoawayOnBadFramesOrAfterManyRequests) {
  RefusingConnection bye("x", "tok");
  bye.Consume(std::string(http2::kClientPreface) + Frame(http2::kGoaway, 0, 0, std::string(8, '\0')));
  EXPECT_TRUE(bye.done());
  RefusingConnection http1("x", "tok");
  http1.Consume("GET / HTTP/1.1\r\n");
  EXPECT_TRUE(http1.done());
  RefusingConnection huge("x", "tok");
  huge.Consume(std::string(http2::kClientPreface) + std::string("\x01\x00\x00\x01\x04\x00\x00\x00\x01", 9));
  EXPECT_TRUE(huge.done()) << "a frame larger than the client may send";
  RefusingConnection even("x", "tok");
  even.Consume(std::string(http2::kClientPreface) + Frame(http2::kHeaders, http2::kEndHeaders, 2, Block({})));
  EXPECT_TRUE(even.done());
  RefusingConnection many("x", "tok");
  std::string in(http2::kClientPreface);
  for (int i = 0; i < RefusingConnection::kMaxAnswered; ++i) {
    in += Frame(http2::kHeaders, http2::kEndHeaders, 2 * i + 1, Block({{":path", "/a"}}));
  }
  many.Consume(in);
  EXPECT_TRUE(many.done());
  EXPECT_EQ(many.answered(), RefusingConnection::kMaxAnswered);
}

TEST(RefusingConnectionTest, ARequestWithTheTokenEndsTheConnectionLeavingItUnprocessed) {
  RefusingConnection r("missing cluster token", "tok");
  std::string out = r.Consume(std::string(http2::kClientPreface) +
                              Frame(http2::kHeaders, http2::kEndHeaders, 1, Block({{":path", "/a"}})) +
                              Frame(http2::kHeaders, http2::kEndHeaders, 3, Block({{"authorization", "Bearer tok"}})) +
                              Frame(http2::kHeaders, http2::kEndHeaders, 5, Block({})));
  EXPECT_EQ(r.answered(), 1);
  EXPECT_TRUE(r.done());
  auto frames = Frames(out);
  ASSERT_EQ(frames.size(), 2u);  // stream 1's answer and its reset only
  EXPECT_EQ(frames[0].header.stream, 1u);
  // The GOAWAY names stream 1: the client sends stream 3's request again elsewhere.
  EXPECT_EQ(Frames(r.Goaway())[0].payload.substr(0, 4), std::string("\0\0\0\x01", 4));
  // Headers that do not decode end the connection.
  RefusingConnection garbled("x", "tok");
  garbled.Consume(std::string(http2::kClientPreface) +
                  Frame(http2::kHeaders, http2::kEndHeaders, 1, "\xff\xff\xff\xff"));
  EXPECT_TRUE(garbled.done());
  EXPECT_EQ(garbled.answered(), 0);
}

}  // namespace
}  // namespace manta::rpc
