# Read by llama.cpp's build (through CMAKE_PROJECT_llama.cpp_INCLUDE) when pip builds llama-cpp-python.

# llama-cpp-python forces llama.cpp's common library on; its bindings load only libllama and libggml.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)

# The build targets this machine's CPU (-march=native), and some virtual machines report AMX in CPUID but fault on
# its first instruction: the model would crash the process on its first token. The AVX-512/AVX2 paths stay.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
    add_compile_options(-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
endif()
