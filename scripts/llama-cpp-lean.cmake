# Included into llama-cpp-python's CMake project by scripts/install-llama-cpp.sh: the Python
# bindings do not use llama.cpp's `common` library, and building it took half of the build
# (measured: 12.5 min -> 5 min on 2 cores with it and llava/mtmd off). The sdist forces the option
# on (set ... FORCE), so it is turned off here, where a project include can still reach it.
set(LLAMA_BUILD_COMMON OFF)
