"""The reference's Apple Metal backend does not exist in this compiler (CUDA and the CPU
interpreter only). Importing it says so."""

raise ImportError("tilelang.metal (the Apple Metal backend) is not available: this TileLang "
                  "targets NVIDIA GPUs (CUDA) and the CPU interpreter; see "
                  "docs/compatibility.md")
