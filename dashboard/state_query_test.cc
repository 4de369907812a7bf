// The State API's list queries: limits and filters parsed as Ray's state API
// takes them, bad ones refused with the reason, and answers with Ray's counts.
#include "dashboard/state_query.h"

#include <gtest/gtest.h>

namespace manta::dashboard {
namespace {

using nlohmann::json;

json Actors() {
  json out = json::array();
  for (int i = 0; i < 5; ++i) {
    out.push_back({{"actor_id", std::to_string(i)},
                   {"state", i < 3 ? "ALIVE" : "DEAD"},
                   {"pid", 100 + i},
                   {"is_detached", i == 0},
                   {"required_resources", {{"CPU", 1}}}});
  }
  return out;
}

TEST(StateQueryTest, DefaultsToRaysLimit) {
  auto q = ParseListQuery({});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->limit, 100);
  EXPECT_TRUE(q->filters.empty());
}

TEST(StateQueryTest, BadLimitsAreRefusedWithTheReason) {
  for (const char* bad : {"0", "-1", "10001", "abc", "", "5x", "99999999999999999999"}) {
    auto q = ParseListQuery({{"limit", bad}});
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(q.status()));
    EXPECT_NE(q.status().message().find("limit must be an integer"), std::string::npos);
  }
  EXPECT_EQ(ParseListQuery({{"limit", "10000"}})->limit, 10000);
}

TEST(StateQueryTest, FiltersComeInThreesWithAKnownPredicate) {
  EXPECT_FALSE(ParseListQuery({{"filter_keys", "state"}, {"filter_values", "ALIVE"}}).ok());
  EXPECT_FALSE(ParseListQuery({{"filter_keys", "state"}, {"filter_predicates", "~"}, {"filter_values", "ALIVE"}}).ok());
  EXPECT_FALSE(ParseListQuery({{"filter_keys", ""}, {"filter_predicates", "="}, {"filter_values", "x"}}).ok());
  auto q = ParseListQuery({{"filter_keys", "state"},
                           {"filter_predicates", "="},
                           {"filter_values", "ALIVE"},
                           {"filter_keys", "pid"},
                           {"filter_predicates", "!="},
                           {"filter_values", "101"}});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->filters.size(), 2u);
  EXPECT_TRUE(q->filters[0].equal);
  EXPECT_FALSE(q->filters[1].equal);
}

TEST(StateQueryTest, AnswersFilterThenTruncateWithRaysCounts) {
  ListQuery q;
  q.limit = 1;
  q.filters = {{"state", true, "ALIVE"}, {"pid", false, "100"}};
  auto a = AnswerListQuery(q, Actors());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)["total"], 5);
  EXPECT_EQ((*a)["num_after_truncation"], 5);
  EXPECT_EQ((*a)["num_filtered"], 2);  // ALIVE and not pid 100: actors 1 and 2
  ASSERT_EQ((*a)["result"].size(), 1u);
  EXPECT_EQ((*a)["result"][0]["actor_id"], "1");
  EXPECT_TRUE((*a)["warnings"].is_null());
}

TEST(StateQueryTest, ATotalReadElsewhereIsReportedAsIs) {
  ListQuery q;
  q.limit = 2;
  json two = json::array({Actors()[0], Actors()[1]});  // the GCS returned the first two of 5
  auto a = AnswerListQuery(q, two, /*total=*/5);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)["total"], 5);
  EXPECT_EQ((*a)["num_after_truncation"], 2);
  EXPECT_EQ((*a)["num_filtered"], 2);
}

TEST(StateQueryTest, BooleansAndNumbersCompareAsJsonWritesThem) {
  ListQuery q;
  q.filters = {{"is_detached", true, "true"}};
  auto a = AnswerListQuery(q, Actors());
  ASSERT_TRUE(a.ok());
  ASSERT_EQ((*a)["num_filtered"], 1);
  EXPECT_EQ((*a)["result"][0]["actor_id"], "0");
  q.filters = {{"required_resources", true, "{}"}};  // an object never equals
  EXPECT_EQ((*AnswerListQuery(q, Actors()))["num_filtered"], 0);
}

TEST(StateQueryTest, AnUnknownColumnIsRefusedWhetherOrNotTheListIsEmpty) {
  ListQuery q;
  q.filters = {{"no_such_column", true, "x"}};
  auto a = AnswerListQuery(q, Actors());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("no_such_column"), std::string::npos);
  const std::set<std::string> columns = ColumnsOf(Actors());
  auto empty = AnswerListQuery(q, json::array(), -1, columns);
  ASSERT_FALSE(empty.ok()) << "an empty list has the same columns";
  EXPECT_EQ(empty.status().message(), a.status().message());
  EXPECT_FALSE(CheckFilterColumns(q, columns).ok());
  q.filters = {{"actor_id", true, "x"}};
  EXPECT_TRUE(CheckFilterColumns(q, columns).ok());
}

TEST(StateQueryTest, AnOffsetSkipsTheMatchingEntriesBeforeThePage) {
  auto query = ParseListQuery({{"limit", "2"}, {"offset", "3"}});
  ASSERT_TRUE(query.ok()) << query.status();
  EXPECT_EQ(query->offset, 3);
  nlohmann::json entries = nlohmann::json::array();
  for (int i = 0; i < 10; ++i) entries.push_back({{"i", i}, {"even", i % 2 == 0}});
  auto page = AnswerListQuery(*query, entries);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ((*page)["result"].size(), 2u);
  EXPECT_EQ((*page)["result"][0]["i"], 3);
  EXPECT_EQ((*page)["num_filtered"], 10);
  // With a filter the offset counts matching entries only.
  auto evens = ParseListQuery({{"limit", "2"},
                               {"offset", "1"},
                               {"filter_keys", "even"},
                               {"filter_predicates", "="},
                               {"filter_values", "true"}});
  ASSERT_TRUE(evens.ok());
  auto even_page = AnswerListQuery(*evens, entries);
  ASSERT_TRUE(even_page.ok());
  EXPECT_EQ((*even_page)["result"][0]["i"], 2);
  EXPECT_EQ((*even_page)["result"][1]["i"], 4);
  // Past the end: an empty page.
  auto past = AnswerListQuery(*ParseListQuery({{"offset", "50"}}), entries);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE((*past)["result"].empty());
  for (const char* bad : {"-1", "x", "10000001", ""}) {
    auto q = ParseListQuery({{"offset", bad}});
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("offset must be an integer"), std::string::npos);
  }
}

}  // namespace
}  // namespace manta::dashboard
