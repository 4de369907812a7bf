#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "dashboard/tar_reader.h"
#include "dashboard/tar_writer.h"
#include "gtest/gtest.h"

namespace manta::dashboard {
namespace {

class TarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manta_tar_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { RemoveTree(dir_).IgnoreError(); }

  // Every entry of `dir_` except the given one, to check nothing was written.
  int CountEntries() {
    int n = 0;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
    return n;
  }

  void ExpectRejectedWhole(const std::string& archive, const std::string& why) {
    std::string dest = dir_ + "/out";
    absl::Status s = ExtractTar(archive, dest, TarLimits{});
    EXPECT_FALSE(s.ok()) << why;
    EXPECT_FALSE(PathExists(dest)) << why;
    EXPECT_EQ(CountEntries(), 0) << why << ": something was left behind";
    EXPECT_FALSE(PathExists(dir_ + "/../escaped")) << why;
  }

  std::string dir_;
};

std::string Archive(std::initializer_list<std::tuple<std::string, char, std::string, std::string>> entries) {
  std::string out;
  for (const auto& [path, type, data, link] : entries) AppendTarEntry(&out, path, type, data, link);
  FinishTar(&out);
  return out;
}

TEST_F(TarTest, PackAndExtractRoundTrip) {
  std::string src = dir_ + "/src";
  ASSERT_TRUE(MakeDirs(src + "/pkg/sub").ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/run.sh", "#!/bin/sh\necho hi\n", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/pkg/sub/data.txt", std::string(5000, 'x')).ok());
  std::string long_name(150, 'n');
  ASSERT_TRUE(WriteFileAtomic(src + "/pkg/" + long_name, "long").ok());
  ASSERT_EQ(symlink("sub/data.txt", (src + "/pkg/link").c_str()), 0);
  auto archive = PackDirectory(src, 1 << 20);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(PackageName(*archive), PackageName(*PackDirectory(src, 1 << 20)));

  std::string dest = dir_ + "/dest";
  ASSERT_TRUE(ExtractTar(*archive, dest, TarLimits{}).ok());
  EXPECT_EQ(*ReadFile(dest + "/run.sh"), "#!/bin/sh\necho hi\n");
  struct stat st;
  ASSERT_EQ(stat((dest + "/run.sh").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);
  EXPECT_EQ(ReadFile(dest + "/pkg/sub/data.txt")->size(), 5000u);
  EXPECT_EQ(*ReadFile(dest + "/pkg/" + long_name), "long");
  EXPECT_EQ(ReadFile(dest + "/pkg/link")->size(), 5000u);
}

TEST_F(TarTest, PackRefusesSymlinkOutOfTheTree) {
  std::string src = dir_ + "/src";
  ASSERT_TRUE(MakeDirs(src).ok());
  ASSERT_EQ(symlink("/etc/passwd", (src + "/passwd").c_str()), 0);
  EXPECT_FALSE(PackDirectory(src, 1 << 20).ok());
}

TEST_F(TarTest, PackEnforcesSizeLimit) {
  std::string src = dir_ + "/src";
  ASSERT_TRUE(MakeDirs(src).ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/big", std::string(2000, 'b')).ok());
  EXPECT_EQ(PackDirectory(src, 1000).status().code(), absl::StatusCode::kResourceExhausted);
}

// The entries of a gzip-compressed archive in order, directories with a trailing '/'.
std::vector<std::string> EntryNames(const std::string& archive) {
  auto tar = MaybeGunzip(archive, 1 << 30);
  EXPECT_TRUE(tar.ok()) << tar.status();
  if (!tar.ok()) return {};
  auto entries = ParseTar(*tar, TarLimits{});
  EXPECT_TRUE(entries.ok()) << entries.status();
  if (!entries.ok()) return {};
  std::vector<std::string> names;
  for (const TarEntry& e : *entries) names.push_back(e.path + (e.type == TarEntry::Type::kDirectory ? "/" : ""));
  return names;
}

// A project tree with ignore files, a build directory and a .git directory.
void WriteProject(const std::string& src) {
  for (const char* d : {"/build/bin", "/build/obj", "/src", "/sub/data", "/.git/objects"}) {
    ASSERT_TRUE(MakeDirs(src + d).ok());
  }
  std::vector<std::pair<std::string, std::string>> files = {
      {".gitignore", "# build outputs\nbuild/\n*.o\n"},
      {"main.cc", "int main() {}"},
      {"main.o", "object"},
      {"a.tmp", "src's *.tmp applies only under src"},
      {"build/obj/x.o", "object"},
      {"build/CMakeCache.txt", "cache"},
      {"src/.gitignore", "!keep.o\n*.tmp\n"},
      {"src/a.o", "object"},
      {"src/keep.o", "kept by the negation"},
      {"src/a.tmp", "tmp"},
      {"src/b.cc", "code"},
      {"sub/.mantaignore", "data/\n"},
      {"sub/data/big", std::string(5000, 'd')},
      {"sub/code.py", "print()"},
      {".git/HEAD", "ref: refs/heads/main"},
      {".git/objects/ab", "blob"},
  };
  for (const auto& [path, data] : files) ASSERT_TRUE(WriteFileAtomic(src + "/" + path, data).ok()) << path;
  ASSERT_TRUE(WriteFileAtomic(src + "/build/bin/prog", "#!/bin/sh\necho trained\n", 0755).ok());
}

TEST_F(TarTest, PackHonoursIgnoreFilesAndSkipsGit) {
  std::string src = dir_ + "/src";
  ASSERT_NO_FATAL_FAILURE(WriteProject(src));
  auto packed = PackDirectoryWithReport(src, 1 << 20);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(EntryNames(packed->archive),
            (std::vector<std::string>{".gitignore", "a.tmp", "main.cc", "src/", "src/.gitignore", "src/b.cc",
                                      "src/keep.o", "sub/", "sub/.mantaignore", "sub/code.py"}));
  EXPECT_TRUE(packed->forced.empty());
  EXPECT_EQ(*PackDirectory(src, 1 << 20), packed->archive);  // deterministic

  PackOptions everything;
  everything.honour_ignore_files = false;
  auto all = PackDirectory(src, 1 << 20, everything);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names = EntryNames(*all);
  EXPECT_EQ(std::count(names.begin(), names.end(), "build/obj/x.o"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "sub/data/big"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "src/a.o"), 1);
  for (const std::string& n : names) EXPECT_NE(n.rfind(".git/", 0), 0u) << n;
}

TEST_F(TarTest, PackAlwaysIncludesNamedFilesAlthoughIgnored) {
  std::string src = dir_ + "/src";
  ASSERT_NO_FATAL_FAILURE(WriteProject(src));
  PackOptions options;
  options.always_include = {"build//bin/prog", "./main.o", "sub/code.py", "missing/file"};
  auto packed = PackDirectoryWithReport(src, 1 << 20, options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(EntryNames(packed->archive),
            (std::vector<std::string>{".gitignore", "a.tmp", "build/", "build/bin/", "build/bin/prog", "main.cc",
                                      "main.o", "src/", "src/.gitignore", "src/b.cc", "src/keep.o", "sub/",
                                      "sub/.mantaignore", "sub/code.py"}));
  ASSERT_EQ(packed->forced.size(), 2u);  // sub/code.py was not ignored, missing/file does not exist
  EXPECT_EQ(packed->forced[0].path, "build/bin/prog");
  EXPECT_EQ(packed->forced[0].ignored_by, ".gitignore");
  EXPECT_EQ(packed->forced[1].path, "main.o");

  std::string dest = dir_ + "/dest";
  ASSERT_TRUE(ExtractTar(packed->archive, dest, TarLimits{}).ok());
  EXPECT_EQ(*ReadFile(dest + "/build/bin/prog"), "#!/bin/sh\necho trained\n");
  struct stat st;
  ASSERT_EQ(stat((dest + "/build/bin/prog").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);

  for (const char* bad : {"../outside", "/etc/passwd", "a/../../b", "."}) {
    options.always_include = {bad};
    EXPECT_EQ(PackDirectory(src, 1 << 20, options).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(TarTest, PackSizeLimitCountsOnlyPackedFiles) {
  std::string src = dir_ + "/src";
  ASSERT_NO_FATAL_FAILURE(WriteProject(src));  // sub/data/big (5000 bytes) is ignored; the rest is well under 1000
  EXPECT_TRUE(PackDirectory(src, 1000).ok());
  PackOptions everything;
  everything.honour_ignore_files = false;
  EXPECT_EQ(PackDirectory(src, 1000, everything).status().code(), absl::StatusCode::kResourceExhausted);
  PackOptions with_big;
  with_big.always_include = {"sub/data/big"};
  EXPECT_EQ(PackDirectory(src, 1000, with_big).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(TarTest, EscapingEntriesRejectArchiveWhole) {
  // Each archive starts with a harmless file, so a partial extraction would show.
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"../escaped", '0', "x", ""}}), "dot-dot");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"a/../../escaped", '0', "x", ""}}), "inner dot-dot");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"/tmp/escaped", '0', "x", ""}}), "absolute");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"l", '2', "", "../escaped"}}), "symlink up");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"l", '2', "", "/etc"}}), "absolute symlink");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"l", '2', "", "."}, {"l/x", '0', "x", ""}}),
                      "write through a symlink");
  // d/b -> ".." is the root (inside), but "d/b/../.." resolves above it.
  ExpectRejectedWhole(Archive({{"d/", '5', "", ""}, {"d/b", '2', "", ".."}, {"a", '2', "", "d/b/../.."}}),
                      "symlink through a symlink");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"h", '1', "", "../escaped"}}), "hard link up");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"h", '1', "", "/etc/passwd"}}), "absolute hard link");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"ok.txt", '2', "", "../x"}}), "duplicate entry");
  ExpectRejectedWhole(Archive({{"ok.txt", '0', "fine", ""}, {"dev", '3', "", ""}}), "device node");
  ExpectRejectedWhole(Archive({{"f", '0', "x", ""}, {"f/g", '0', "y", ""}}), "file under a file");
}

TEST_F(TarTest, CorruptOrTruncatedArchivesAreRejected) {
  std::string good = Archive({{"a.txt", '0', std::string(1000, 'a'), ""}});
  ExpectRejectedWhole(good.substr(0, 700), "truncated");
  std::string corrupt = good;
  corrupt[10] ^= 1;
  ExpectRejectedWhole(corrupt, "bad checksum");
  ExpectRejectedWhole("not a tar archive at all", "garbage");
  ExpectRejectedWhole(std::string("\x1f\x8b garbage", 10), "bad gzip");
}

TEST_F(TarTest, SizeAndEntryLimits) {
  std::string big = Archive({{"a", '0', std::string(3000, 'a'), ""}});
  TarLimits small;
  small.max_unpacked_bytes = 2000;
  EXPECT_EQ(ExtractTar(big, dir_ + "/out", small).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(PathExists(dir_ + "/out"));
  // A gzip bomb: 64 MiB of zeros compress to ~64 KiB.
  std::string bomb_tar = Archive({{"zeros", '0', std::string(64 << 20, '\0'), ""}});
  auto bomb = Gzip(bomb_tar);
  ASSERT_TRUE(bomb.ok());
  EXPECT_LT(bomb->size(), 1u << 20);
  small.max_unpacked_bytes = 1 << 20;
  EXPECT_EQ(ExtractTar(*bomb, dir_ + "/out", small).code(), absl::StatusCode::kResourceExhausted);
  TarLimits few;
  few.max_entries = 1;
  EXPECT_EQ(ExtractTar(Archive({{"a", '0', "", ""}, {"b", '0', "", ""}}), dir_ + "/out", few).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(TarTest, InsideLinksAndHardLinksAreAllowed) {
  std::string archive = Archive({{"./", '5', "", ""},
                                 {"./dir/", '5', "", ""},
                                 {"./dir/file", '0', "content", ""},
                                 {"./up", '2', "", "dir/../dir/file"},
                                 {"./dir/sibling", '2', "", "../dir/file"},
                                 {"./hard", '1', "", "dir/file"}});
  std::string dest = dir_ + "/out";
  ASSERT_TRUE(ExtractTar(archive, dest, TarLimits{}).ok());
  EXPECT_EQ(*ReadFile(dest + "/up"), "content");
  EXPECT_EQ(*ReadFile(dest + "/dir/sibling"), "content");
  EXPECT_EQ(*ReadFile(dest + "/hard"), "content");
}

TEST_F(TarTest, ReadsArchivesFromSystemTar) {
  // 126 characters: a GNU long name, a pax path, or a ustar prefix split.
  std::string rel = "d/" + std::string(60, 'p') + "/" + std::string(60, 'q') + ".txt";
  std::string src = dir_ + "/src";
  ASSERT_TRUE(MakeDirs(src + "/d/" + std::string(60, 'p')).ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/" + rel, "from system tar").ok());
  for (const char* format : {"gnu", "pax", "ustar"}) {
    std::string tar = dir_ + "/sys.tar";
    std::string cmd = "tar --format=" + std::string(format) + " -C " + src + " -cf " + tar + " .";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto data = ReadFile(tar);
    ASSERT_TRUE(data.ok());
    std::string dest = dir_ + "/out_" + format;
    absl::Status s = ExtractTar(*data, dest, TarLimits{});
    ASSERT_TRUE(s.ok()) << format << ": " << s;
    EXPECT_EQ(*ReadFile(dest + "/" + rel), "from system tar") << format;
    unlink(tar.c_str());
  }
}

TEST_F(TarTest, DeepTreesAndLongNamesAreRefusedAtUpload) {
  // 1,500 directories deep (35 KB): refused by the first check, not
  // extracted for minutes.
  std::string deep;
  std::string path;
  for (int i = 0; i < 1500; ++i) path += "d/";
  AppendTarEntry(&deep, path + "f", '0', "x");
  FinishTar(&deep);
  auto parsed = ParseTar(deep, TarLimits{});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("bytes; at most 1024"), std::string::npos) << parsed.status();
  std::string tall;
  std::string tall_path;
  for (int i = 0; i < 65; ++i) tall_path += "d/";
  AppendTarEntry(&tall, tall_path + "f", '0', "x");
  FinishTar(&tall);
  parsed = ParseTar(tall, TarLimits{});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("more than 64 directories deep"), std::string::npos) << parsed.status();
  // A 5,000-byte entry name, and a link target as long.
  std::string named;
  AppendTarEntry(&named, std::string(5000, 'n'), '0', "x");
  FinishTar(&named);
  parsed = ParseTar(named, TarLimits{});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("bytes; at most"), std::string::npos) << parsed.status();
  std::string one_name;
  AppendTarEntry(&one_name, "dir/" + std::string(300, 'n'), '0', "x");
  FinishTar(&one_name);
  parsed = ParseTar(one_name, TarLimits{});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("a name of 300 bytes; at most 255"), std::string::npos) << parsed.status();
  std::string linked;
  AppendTarEntry(&linked, "link", '2', "", std::string(2000, 'l'));
  FinishTar(&linked);
  EXPECT_FALSE(ParseTar(linked, TarLimits{}).ok());
  ExpectRejectedWhole(deep, "deep");
  ExpectRejectedWhole(named, "long name");
}

TEST_F(TarTest, ATreeAtTheDepthLimitExtractsWithEveryEntryInPlace) {
  // Entries in an order that leaves and re-enters directories.
  std::string archive;
  std::string chain;
  std::vector<std::string> files;
  for (int i = 0; i < 63; ++i) {
    chain += "d" + std::to_string(i) + "/";
    files.push_back(chain + "f");
  }
  for (size_t i = 0; i < files.size(); i += 2) AppendTarEntry(&archive, files[i], '0', files[i]);
  AppendTarEntry(&archive, "top.txt", '0', "top");
  for (size_t i = 1; i < files.size(); i += 2) AppendTarEntry(&archive, files[i], '0', files[i]);
  AppendTarEntry(&archive, "d0/d1/link", '2', "", "../d1/f");
  FinishTar(&archive);
  const std::string dest = dir_ + "/out";
  ASSERT_TRUE(ExtractTar(archive, dest, TarLimits{}).ok());
  for (const std::string& f : files) {
    auto data = ReadFile(dest + "/" + f);
    ASSERT_TRUE(data.ok()) << f;
    EXPECT_EQ(*data, f);
  }
  EXPECT_EQ(*ReadFile(dest + "/top.txt"), "top");
  EXPECT_EQ(*ReadFile(dest + "/d0/d1/link"), "d0/d1/f");
  // A file where the archive later wants a directory is refused whole.
  ASSERT_TRUE(RemoveTree(dest).ok());
  std::string clash;
  AppendTarEntry(&clash, "a", '0', "file");
  AppendTarEntry(&clash, "b/c", '0', "x");
  AppendTarEntry(&clash, "a/d", '0', "x");
  FinishTar(&clash);
  ExpectRejectedWhole(clash, "a file used as a directory");
}

}  // namespace
}  // namespace manta::dashboard
