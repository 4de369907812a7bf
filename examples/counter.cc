// A counter actor: state that lives in one worker process, called in order.
#include <manta/api.h>

#include <iostream>
#include <string>
#include <vector>

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Incr(int by) {
    value_ += by;
    std::cout << "counter is now " + std::to_string(value_) + "\n" << std::flush;
    return value_;
  }
  int Value() { return value_; }

 private:
  int value_;
};
MANTA_REMOTE(Counter::Create, &Counter::Incr, &Counter::Value);

int Add(int a, int b) { return a + b; }
MANTA_REMOTE(Add);

// One write per line: worker output is printed by another thread of the
// driver, and a line built from several << could be split by it.
void Print(const std::string& line) { std::cout << line + "\n" << std::flush; }

int main(int argc, char** argv) {
  // No cluster (or a refused token) is one line and exit status 1.
  if (absl::Status s = manta::TryInit(argc, argv); !s.ok()) {
    std::cerr << argv[0] << ": " << s.message() << "\n";
    return 1;
  }
  Print("Add(1, 2) = " + std::to_string(*manta::Get(manta::Task(Add).Remote(1, 2))));
  auto counter = manta::Actor(Counter::Create).SetName("counter").Remote(10);
  std::vector<manta::ObjectRef<int>> steps;
  for (int i = 1; i <= 5; ++i) steps.push_back(counter.Task(&Counter::Incr).Remote(i));
  for (auto& s : steps) Print("step -> " + std::to_string(*manta::Get(s)));
  Print("final value " + std::to_string(*manta::Get(counter.Task(&Counter::Value).Remote())));
  manta::Kill(counter);
  manta::Shutdown();
  return 0;
}
