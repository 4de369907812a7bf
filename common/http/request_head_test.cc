#include "common/http/request_head.h"

#include <string>

#include "gtest/gtest.h"

namespace manta::http {
namespace {

TEST(RequestHeadTest, ParsesTheLineTheHeadersAndTheFraming) {
  auto head =
      ParseRequestHead("POST /generate?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nX-Thing:  padded  \r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->method, "POST");
  EXPECT_EQ(head->target, "/generate?x=1");
  EXPECT_EQ(head->path, "/generate");
  EXPECT_EQ(head->framing, BodyFraming::kLength);
  EXPECT_EQ(head->content_length, 12u);
  EXPECT_EQ(head->Header("x-thing").value_or(""), "padded");
  EXPECT_FALSE(head->Header("Missing").has_value());

  auto get = ParseRequestHead("GET /healthcheck HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->framing, BodyFraming::kNone);
  auto chunked = ParseRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
  ASSERT_TRUE(chunked.ok());
  EXPECT_EQ(chunked->framing, BodyFraming::kChunked);
}

TEST(RequestHeadTest, AmbiguousOrUnsupportedFramingIsRefused) {
  struct Case {
    const char* head;
    int status;
  } cases[] = {
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},  // smuggling
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\n", 415},
      {"GET / HTTP/2.0\r\n\r\n", 400},
      {"GET noslash HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n folded: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n", 400},
  };
  for (const Case& c : cases) {
    auto head = ParseRequestHead(c.head);
    ASSERT_FALSE(head.ok()) << c.head;
    EXPECT_EQ(HeadErrorStatus(head.status()), c.status) << c.head << ": " << head.status();
  }
  // The same length twice is no ambiguity.
  EXPECT_TRUE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").ok());
  EXPECT_TRUE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Encoding: identity\r\n\r\n").ok());
}

TEST(ChunkedDecoderTest, DecodesBodiesFedInAnyPieces) {
  const std::string body = "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t step : {1u, 2u, 3u, 7u, 1000u}) {
    ChunkedDecoder d(1000);
    ChunkedDecoder::State s = ChunkedDecoder::State::kMore;
    for (size_t i = 0; i < body.size(); i += step) s = d.Feed(std::string_view(body).substr(i, step));
    ASSERT_EQ(s, ChunkedDecoder::State::kDone) << step;
    EXPECT_EQ(d.body(), "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(d.excess(), 4u);
  }
}

TEST(ChunkedDecoderTest, StopsAtItsLimitAndAtMalformedFraming) {
  ChunkedDecoder small(8);
  EXPECT_EQ(small.Feed("5\r\nhello\r\n"), ChunkedDecoder::State::kMore);
  EXPECT_EQ(small.Feed("5\r\n"), ChunkedDecoder::State::kTooLarge) << "refused from the size line, before its data";
  // A size that would wrap the count.
  EXPECT_EQ(ChunkedDecoder(100).Feed("ffffffffffffffff\r\n"), ChunkedDecoder::State::kMalformed);
  for (const char* bad : {"zz\r\n", "5\nhello\r\n", "5\r\nhelloXX", "\r\n"}) {
    EXPECT_EQ(ChunkedDecoder(100).Feed(bad), ChunkedDecoder::State::kMalformed) << bad;
  }
  // Endless trailers or size lines are bounded too.
  ChunkedDecoder trailers(100);
  EXPECT_EQ(trailers.Feed("0\r\n"), ChunkedDecoder::State::kMore);
  ChunkedDecoder::State s = ChunkedDecoder::State::kMore;
  for (int i = 0; i < 1000 && s == ChunkedDecoder::State::kMore; ++i) s = trailers.Feed("X-Long: aaaaaaaaaaaaaaaa\r\n");
  EXPECT_EQ(s, ChunkedDecoder::State::kMalformed);
  EXPECT_EQ(ChunkedDecoder(100).Feed(std::string(5000, '1')), ChunkedDecoder::State::kMalformed);
}

}  // namespace
}  // namespace manta::http
