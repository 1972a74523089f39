// The translation unit that builds the unit tests' shared precompiled header (cmake/flashserve.cmake).
