// A thunk profile for finding where a program's time goes: with env
// TESSEL_PROFILE=1, the time of every thunk run at launch position 0 is
// summed per thunk description and printed to stderr at exit, largest first.
#pragma once

#include <string>

namespace tessel::rt::profile {

bool enabled();
void record(const std::string& what, double seconds);

}  // namespace tessel::rt::profile
