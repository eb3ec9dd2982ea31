// Subcommands of kt-gguf; each returns the process exit code.
#pragma once

namespace kt::gguf_tool {
int info_main(int argc, char** argv);
int synth_main(int argc, char** argv);
int profile_show_main(int argc, char** argv);   // profile.cpp
int profile_merge_main(int argc, char** argv);
int profile_synth_main(int argc, char** argv);
}
