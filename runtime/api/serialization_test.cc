#include "manta/serialization.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace manta {
namespace {

struct Point {
  double x = 0;
  double y = 0;
  std::string label;
  std::vector<int> tags;
  MSGPACK_DEFINE(x, y, label, tags);
  bool operator==(const Point& o) const { return x == o.x && y == o.y && label == o.label && tags == o.tags; }
};

template <typename T>
T RoundTrip(const T& value) {
  absl::StatusOr<std::string> bytes = Serialize(value);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<T> back = Deserialize<T>(*bytes);
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : T{};
}

TEST(SerializationTest, Scalars) {
  EXPECT_EQ(RoundTrip(42), 42);
  EXPECT_EQ(RoundTrip<int64_t>(-(int64_t{1} << 40)), -(int64_t{1} << 40));
  EXPECT_EQ(RoundTrip(2.5), 2.5);
  EXPECT_EQ(RoundTrip(true), true);
  EXPECT_EQ(RoundTrip(std::string("hello")), "hello");
}

TEST(SerializationTest, Containers) {
  std::map<std::string, std::vector<std::string>> m{{"a", {"x", "y"}}, {"b", {}}};
  EXPECT_EQ(RoundTrip(m), m);
  auto t = std::make_tuple(1, std::string("two"), 3.0);
  EXPECT_EQ(RoundTrip(t), t);
  std::vector<bool> bits{true, false, true};
  EXPECT_EQ(RoundTrip(bits), bits);
}

TEST(SerializationTest, StructWithMsgpackDefine) {
  Point p{1.5, -2, "origin", {1, 2, 3}};
  EXPECT_EQ(RoundTrip(p), p);
  std::vector<Point> points{p, Point{}};
  EXPECT_EQ(RoundTrip(points), points);
}

TEST(SerializationTest, ValuesBiggerDecodedThanEncoded) {
  // One byte each on the wire, a msgpack object each once decoded: the
  // decoder's memory outgrows what the encoded size suggests.
  std::vector<std::vector<int>> empties(100000);
  empties[4321] = {7, 8};
  EXPECT_EQ(RoundTrip(empties), empties);
  std::map<int, std::vector<int>> sparse;
  for (int i = 0; i < 5000; ++i) sparse[i] = {};
  EXPECT_EQ(RoundTrip(sparse), sparse);
}

TEST(SerializationTest, FloatBlobIsRawBytes) {
  std::vector<float> values{1.0f, -2.5f, 3.25f};
  absl::StatusOr<std::string> bytes = Serialize(values);
  ASSERT_TRUE(bytes.ok());
  // One bin8 header (0xc4, length) and the floats' bytes, not an array.
  ASSERT_EQ(bytes->size(), 2 + values.size() * sizeof(float));
  EXPECT_EQ(static_cast<unsigned char>((*bytes)[0]), 0xc4);
  EXPECT_EQ(RoundTrip(values), values);
}

TEST(SerializationTest, LargeBlobHasNoPerElementEncoding) {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<float> values(kBytes / sizeof(float));
  for (size_t i = 0; i < values.size(); i += 4097) values[i] = static_cast<float>(i);
  absl::StatusOr<std::string> bytes = Serialize(values);
  ASSERT_TRUE(bytes.ok());
  // bin32: a 5-byte header and exactly the raw bytes.
  EXPECT_EQ(bytes->size(), kBytes + 5);
  EXPECT_EQ(static_cast<unsigned char>((*bytes)[0]), 0xc6);
  absl::StatusOr<std::vector<float>> back = Deserialize<std::vector<float>>(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == values);
}

TEST(SerializationTest, ByteAndStringBlobs) {
  std::vector<uint8_t> raw(1000, 7);
  absl::StatusOr<std::string> bytes = Serialize(raw);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), raw.size() + 3);  // bin16
  EXPECT_EQ(RoundTrip(raw), raw);
  std::string text(70000, 'x');
  bytes = Serialize(text);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), text.size() + 5);  // str32
  EXPECT_EQ(RoundTrip(text), text);
  EXPECT_EQ(RoundTrip(std::vector<double>{1, 2, 3}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(RoundTrip(std::vector<float>{}), std::vector<float>{});
}

TEST(SerializationTest, FloatVectorAlsoReadsMsgpackArray) {
  std::string bytes;
  internal::StringWriter writer(&bytes);
  msgpack::packer<internal::StringWriter> packer(writer);
  packer.pack_array(2);
  packer.pack(1.5f);
  packer.pack(2.5f);
  absl::StatusOr<std::vector<float>> back = Deserialize<std::vector<float>>(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, (std::vector<float>{1.5f, 2.5f}));
}

TEST(SerializationTest, WrongTypeIsAnErrorNamingTheType) {
  absl::StatusOr<std::string> bytes = Serialize(std::string("not a number"));
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<int> value = Deserialize<int>(*bytes);
  ASSERT_FALSE(value.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(value.status()));
  EXPECT_NE(value.status().message().find("int"), std::string::npos) << value.status();
  absl::StatusOr<Point> point = Deserialize<Point>(*bytes);
  ASSERT_FALSE(point.ok());
  EXPECT_NE(point.status().message().find("Point"), std::string::npos) << point.status();
}

TEST(SerializationTest, GarbageAndTruncationAreErrors) {
  EXPECT_FALSE(Deserialize<int>("").ok());
  EXPECT_FALSE(Deserialize<std::string>("\xdb\xff\xff\xff\xff"
                                        "abc")
                   .ok());
  EXPECT_FALSE(Deserialize<std::vector<float>>("\xc4\x03"
                                               "abc")
                   .ok());                                       // not whole floats
  EXPECT_FALSE(Deserialize<std::vector<int>>("\x93\x01").ok());  // truncated array
  absl::StatusOr<std::string> bytes = Serialize(5);
  ASSERT_TRUE(bytes.ok());
  EXPECT_FALSE(Deserialize<int>(*bytes + "x").ok());  // trailing bytes
}

}  // namespace
}  // namespace manta
