// A thunk profile for finding where a program's time goes: with env
// TESSEL_PROFILE=1, the wall time and the driver thread's CPU time of every
// thunk run at launch position 0 are summed per thunk description and printed
// to stderr at exit, largest wall time first. Wall minus CPU is time spent
// waiting (for peers in a collective, or preempted); CPU counts the driver
// thread only, so a device's other threads' work is not in it.
#pragma once

#include <string>

namespace tessel::rt::profile {

bool enabled();
void record(const std::string& what, double wall_seconds, double cpu_seconds);
// The calling thread's CPU time in seconds.
double thread_cpu_seconds();

}  // namespace tessel::rt::profile
