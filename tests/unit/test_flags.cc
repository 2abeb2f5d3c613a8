// Flag parsing: values, ranges, lists and every kind of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "harness/driver/flags.h"
#include "harness/driver/sweep.h"
#include "kernels/pattern.h"

namespace {

struct Parsed {
  bool check = true;
  int64_t iters = 20;
  double factor = 2;
  uint64_t bytes = 1024;
  std::string dtype = "bf16";
  std::vector<std::string> ops{"a"};
};

// `args` parsed by `f` as a program's command line; `help` (optional) says whether --help was.
zb::Status parse_with(zb::Flags& f, std::vector<std::string> args, bool* help = nullptr) {
  std::vector<char*> argv{const_cast<char*>("prog")};
  for (auto& a : args) argv.push_back(a.data());
  std::vector<std::string> pass;
  bool h = false;
  zb::Status s = f.parse(int(argv.size()), argv.data(), &pass, &h);
  if (help) *help = h;
  return s;
}

zb::Status parse(std::vector<std::string> args, Parsed* p, bool* help = nullptr) {
  zb::Flags f("prog");
  f.add_bool("check", &p->check, "");
  f.add_int("iters", &p->iters, "", 1, 100);
  f.add_double("step-factor", &p->factor, "", 1.0, 64);
  f.add_bytes("min-bytes", &p->bytes, "", 1);
  f.add_choice("dtype", &p->dtype, "", {"bf16", "fp32"});
  f.add_list("ops", &p->ops, "", {"a", "b", "c"});
  return parse_with(f, args, help);
}

}  // namespace

TEST(Flags, GoodValues) {
  Parsed p;
  ASSERT_TRUE(parse({"--no-check", "--iters=7", "--step-factor", "4", "--min-bytes=4M",
                     "--dtype=fp32", "--ops=c,a", "--benchmark_filter=x"}, &p));
  EXPECT_FALSE(p.check);
  EXPECT_EQ(p.iters, 7);
  EXPECT_EQ(p.factor, 4);
  EXPECT_EQ(p.bytes, 4u << 20);
  EXPECT_EQ(p.dtype, "fp32");
  EXPECT_EQ(p.ops, (std::vector<std::string>{"c", "a"}));
}

TEST(Flags, ByteSuffixes) {
  uint64_t v = 0;
  ASSERT_TRUE(zb::parse_bytes("64K", &v));
  EXPECT_EQ(v, 65536u);
  ASSERT_TRUE(zb::parse_bytes("1GiB", &v));
  EXPECT_EQ(v, 1ull << 30);
  ASSERT_TRUE(zb::parse_bytes("1.5M", &v));
  EXPECT_EQ(v, 3u << 19);
  EXPECT_FALSE(zb::parse_bytes("12Q", &v));
  EXPECT_FALSE(zb::parse_bytes("-4", &v));
  EXPECT_FALSE(zb::parse_bytes("0.5", &v));
}

TEST(Flags, ParameterCountsAreDecimal) {
  uint64_t v = 0;
  for (const char* text : {"16000000", "16e6", "16M", "16.0M", "0.016G"}) {
    ASSERT_TRUE(zb::parse_count(text, &v)) << text;
    EXPECT_EQ(v, 16000000u) << text;
  }
  ASSERT_TRUE(zb::parse_count("1.1M", &v));  // 1100000.0000000002 in binary
  EXPECT_EQ(v, 1100000u);
  ASSERT_TRUE(zb::parse_count("7T", &v));
  EXPECT_EQ(v, 7000000000000u);
  ASSERT_TRUE(zb::parse_count("64K", &v));
  EXPECT_EQ(v, 64000u);  // not 65536: a count is not a byte size
  for (const char* text :
       {"", "M", "1.5", "16MiB", "16m", "-4", "4Q", "1e-3", "nan", "inf", "1e30"})
    EXPECT_FALSE(zb::parse_count(text, &v)) << text;
}

TEST(Flags, CountsAndListsOfWholeNumbers) {
  zb::Flags f("prog");
  uint64_t params = 1;
  std::vector<int64_t> slots{1, 2, 3};
  f.add_count("params", &params, "", 1, 1000000000);
  f.add_ints("slots", &slots, "", 1, 64);
  auto run = [&](std::vector<std::string> args) { return parse_with(f, args); };
  ASSERT_TRUE(run({"--params=2.5M", "--slots=4"}));
  EXPECT_EQ(params, 2500000u);
  EXPECT_EQ(slots, (std::vector<int64_t>{4}));
  ASSERT_TRUE(run({"--slots=3,1"}));
  EXPECT_EQ(slots, (std::vector<int64_t>{3, 1}));
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"--params=0"}, {"--params=2G"}, {"--params=x"}, {"--slots=0"}, {"--slots=65"},
           {"--slots=1,1"}, {"--slots=1,"}, {"--slots="}, {"--slots=1.5"}}) {
    zb::Status s = run(bad);
    EXPECT_FALSE(s) << bad[0];
    const std::string flag = bad[0].substr(0, bad[0].find('='));  // the flag named in the line
    EXPECT_NE(s.message().find(flag), std::string::npos) << s.message();
  }
}

TEST(Flags, ListsOfByteSizes) {
  zb::Flags f("prog");
  std::vector<uint64_t> footprint{0};
  f.add_bytes_list("footprint", &footprint, "");
  auto run = [&](std::vector<std::string> args) { return parse_with(f, args); };
  ASSERT_TRUE(run({"--footprint=16M"}));
  EXPECT_EQ(footprint, (std::vector<uint64_t>{16u << 20}));
  ASSERT_TRUE(run({"--footprint=0,4K,1.5M"}));
  EXPECT_EQ(footprint, (std::vector<uint64_t>{0, 4096, 1572864}));
  for (std::string bad : {"--footprint=4M,4M", "--footprint=4M,4096K", "--footprint=4M,", "--footprint=",
                          "--footprint=x", "--footprint=-1", "--footprint=3Q"}) {
    zb::Status s = run({bad});
    EXPECT_FALSE(s) << bad;
    EXPECT_NE(s.message().find("--footprint"), std::string::npos) << s.message();
  }
}

TEST(Flags, EveryBadInputIsAnError) {
  const std::vector<std::vector<std::string>> bad = {
      {"--iters=0"},     {"--iters=101"},       {"--iters=ten"},       {"--iters"},
      {"--step-factor=0.5"}, {"--step-factor=nan"}, {"--min-bytes=0"}, {"--min-bytes=4X"},
      {"--dtype=fp16"},  {"--ops=a,d"},         {"--ops=a,a"},        {"--ops="},
      {"--ops=a,"},
      {"--check=maybe"}, {"--no-check=1"},      {"--unknown=1"},      {"stray"},
  };
  for (const auto& args : bad) {
    Parsed p;
    zb::Status s = parse(args, &p);
    EXPECT_FALSE(s) << args[0];
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
  }
}

TEST(Flags, HelpIsRequestedNotAnError) {
  Parsed p;
  bool help = false;
  ASSERT_TRUE(parse({"--help"}, &p, &help));
  EXPECT_TRUE(help);
}

TEST(Sweep, GeometricWithMaxIncluded) {
  EXPECT_EQ(zb::size_sweep(1024, 8192, 2), (std::vector<uint64_t>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(zb::size_sweep(1000, 5000, 4), (std::vector<uint64_t>{1000, 4000, 5000}));
  EXPECT_EQ(zb::size_sweep(64, 64, 2), (std::vector<uint64_t>{64}));
  EXPECT_TRUE(zb::size_sweep(65, 64, 2).empty());
}

TEST(Pattern, SumsStayExactInBf16) {
  for (int ranks : {1, 2, 3, 4, 64, 65, 1000})
    for (uint64_t i = 0; i < 300; ++i) {
      double s = zb::pattern_sum(i, ranks);
      EXPECT_LE(std::abs(s), 128.0) << ranks;
      EXPECT_EQ(s, std::floor(s));
    }
  // Values depend on both rank and index, so a shifted or swapped block is caught.
  EXPECT_NE(zb::pattern_value(0, 0, 4), zb::pattern_value(1, 0, 4));
  EXPECT_NE(zb::pattern_value(0, 0, 4), zb::pattern_value(0, 1, 4));
}

// --help fits a terminal: every line within 100 columns, a description's continuation lines at
// column 30, every word kept in order, and a description that names its own default is not
// given a second one.
TEST(Flags, HelpWrapsEachDescriptionUnderItsColumn) {
  std::string words;
  for (int i = 0; i < 60; ++i) words += (i ? " " : "") + std::string("word") + std::to_string(i);
  int64_t n = 3, m = 0;
  std::string s = "x";
  zb::Flags f("prog", words);
  f.add_int("count", &n, words, 0, 10);
  f.add_int("slots", &m, "how many (default 0: as many as fit)", 0, 10);
  f.add_string("a-flag-name-longer-than-its-column", &s, "short");
  const std::string text = f.usage();
  std::istringstream lines(text);
  std::string line, joined;
  std::vector<std::string> all;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
    all.push_back(line);
  }
  // The --count entry: its head line, then continuation lines indented to column 30.
  size_t at = 0;
  while (at < all.size() && all[at].rfind("  --count=N", 0) != 0) ++at;
  ASSERT_LT(at, all.size());
  joined = all[at].substr(30);
  for (size_t i = at + 1; i < all.size() && all[i].rfind(std::string(30, ' '), 0) == 0; ++i) {
    EXPECT_NE(all[i][30], ' ') << all[i];
    joined += " " + all[i].substr(30);
  }
  EXPECT_EQ(joined, words + " (default 3)");
  EXPECT_NE(text.find("how many (default 0: as many as fit)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("(default 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("  --a-flag-name-longer-than-its-column=TEXT\n" + std::string(30, ' ') + "short (default x)\n"),
            std::string::npos)
      << text;
}

// A line break the author put in a description is kept, and a word wider than the line stands
// on a line of its own rather than being cut.
TEST(Flags, HelpKeepsLineBreaksAndWholeWords) {
  const std::string wide(120, 'w');
  int64_t n = 1;
  zb::Flags f("prog", "First line.\nSecond line.");
  f.add_int("count", &n, "before " + wide + " after\nnext line", 0, 10);
  const std::string text = f.usage();
  EXPECT_NE(text.find("First line.\nSecond line.\n"), std::string::npos) << text;
  const std::string pad(30, ' ');
  EXPECT_NE(text.find("  --count=N" + std::string(19, ' ') + "before\n" + pad + wide + "\n" + pad + "after\n" + pad +
                      "next line (default 1)\n"),
            std::string::npos)
      << text;
}
