#include "runtime/core_worker/log_printer.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace manta::core {
namespace {

std::string Read(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  return out;
}

class LogPrinterTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::fclose(out_);
    std::fclose(err_);
  }
  static std::string Worker(int pid) { return "(TrainWorker pid=" + std::to_string(pid) + ", ip=127.0.0.1)"; }
  static std::string Step(int step, double loss) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "completed step: %d, seconds: 0.10%d, TFLOP/s/device: 0.002, Tokens/s/device: 2455.5, "
                  "total_weights: 4096, loss: %.3f",
                  step, step % 10, loss);
    return buf;
  }
  FILE* out_ = std::tmpfile();
  FILE* err_ = std::tmpfile();
  absl::Time t0_ = absl::FromUnixSeconds(100);
};

TEST_F(LogPrinterTest, CollapsesIdenticalLinesAcrossWorkers) {
  LogPrinter p(absl::Seconds(5), out_, err_);
  for (int i = 0; i < 8; ++i) p.Add(Worker(100 + i), "hello", false, t0_ + absl::Milliseconds(i));
  p.Add(Worker(100), "other", true, t0_);
  p.Tick(t0_ + absl::Seconds(6));
  EXPECT_EQ(Read(out_), Worker(100) + " hello\n" + Worker(107) + " hello [repeated 7x across cluster]\n");
  EXPECT_EQ(Read(err_), Worker(100) + " other\n");
}

TEST_F(LogPrinterTest, LinesThatDifferOnlyInNumbersAreOnePattern) {
  EXPECT_EQ(CanonicalLogLine(Step(3, 5.86)), CanonicalLogLine(Step(99, 0.001)));
  EXPECT_EQ(CanonicalLogLine("at 0xdeadbeef  value  x1 done"), "at value done");
  EXPECT_NE(CanonicalLogLine("saved checkpoint a"), CanonicalLogLine("saved checkpoint b"));

  // Four workers, three steps each, inside one window: the first line, then
  // the latest of the other eleven.
  LogPrinter p(absl::Seconds(5), out_, err_);
  for (int step = 0; step < 3; ++step) {
    for (int w = 0; w < 4; ++w) {
      p.Add(Worker(200 + w), Step(step, 6.0 - step), false, t0_ + absl::Milliseconds(100 * step + w));
    }
  }
  p.Tick(t0_ + absl::Seconds(4));
  EXPECT_EQ(Read(out_), Worker(200) + " " + Step(0, 6.0) + "\n") << "nothing more before the window closes";
  p.Tick(t0_ + absl::Seconds(5));
  EXPECT_EQ(Read(out_), Worker(200) + " " + Step(0, 6.0) + "\n" + Worker(203) + " " + Step(2, 4.0) +
                            " [repeated 11x across cluster]\n");
  // A new window starts with the next line.
  p.Add(Worker(201), Step(3, 3.5), false, t0_ + absl::Seconds(6));
  EXPECT_NE(Read(out_).find(Worker(201) + " " + Step(3, 3.5) + "\n"), std::string::npos);
}

TEST_F(LogPrinterTest, OneWorkersLinesAreAllPrinted) {
  LogPrinter p(absl::Seconds(5), out_, err_);
  for (int step = 0; step < 3; ++step) p.Add(Worker(300), Step(step, 5), false, t0_ + absl::Milliseconds(step));
  p.Flush();
  EXPECT_EQ(Read(out_), Worker(300) + " " + Step(0, 5) + "\n" + Worker(300) + " " + Step(1, 5) + "\n" + Worker(300) +
                            " " + Step(2, 5) + "\n");
}

TEST_F(LogPrinterTest, LinesOfOnlyNumbersAreNeverCollapsed) {
  LogPrinter p(absl::Seconds(5), out_, err_);
  p.Add(Worker(1), "42", false, t0_);
  p.Add(Worker(2), "43", false, t0_);
  p.Flush();
  EXPECT_EQ(Read(out_), Worker(1) + " 42\n" + Worker(2) + " 43\n");
}

}  // namespace
}  // namespace manta::core
