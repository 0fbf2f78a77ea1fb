// Warnings: what JAX reports through Python's `warnings.warn` (a UserWarning)
// and keeps running, such as a donated argument no output could use.
//
// By default each distinct message is written to stderr once, as
// "UserWarning: <message>" (Python's default filter shows a warning once per
// place). A handler set here receives every warning instead; tests and
// programs that turn warnings into errors set one.
#pragma once

#include <functional>
#include <string>

namespace tessel {

using WarningHandler = std::function<void(const std::string& message)>;

// Sets the handler (null: the default) and returns the previous one.
WarningHandler set_warning_handler(WarningHandler handler);

// Reports a warning to the handler.
void warn(const std::string& message);

}  // namespace tessel
