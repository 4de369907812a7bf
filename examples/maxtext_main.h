// The body of maxtext_trainer and maxtext_elastic_trainer: flags, the
// trainer's configs, Fit and the summary line. See those programs.
#pragma once

namespace maxtext_example {

// `elastic`: num_workers {one slice, every slice found} unless the flags
// say otherwise; else every slice found.
int Main(int argc, char** argv, bool elastic);

}  // namespace maxtext_example
