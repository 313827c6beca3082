// The translation unit that compiles the precompiled MLIR headers
// (cmake/PrecompiledHeaders.cmake); it defines nothing.
