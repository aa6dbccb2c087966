//! The C allocator's settings for training on the CPU.
//!
//! Each step allocates and frees the same large tensors: at `125m` with its
//! 256,000-entry vocabulary, the logits and their gradient (512 MiB each at 512 tokens),
//! the embedding's gradient (750 MiB) and its sum with the output projection's. glibc
//! serves every block over 32 MiB with a fresh `mmap` and unmaps it on `free`, so each
//! step the kernel faults in and zeroes every page of them again. Measured with `perf` on
//! `125m` at 4 × 128 tokens on 2 cores: a fifth of the run's cycles were the kernel
//! clearing pages, and the backward pass took 5.1–6.1 s a step; with the blocks kept, 2.3
//! s. The process then keeps its peak footprint for its whole life, as PyTorch's caching
//! allocators do on a GPU, which is what a training process reaches again every step.

/// Serves large blocks from the heap and never gives freed memory back to the kernel
/// (glibc's `M_MMAP_MAX` 0 and `M_TRIM_THRESHOLD` -1). Returns whether the allocator
/// took both settings; elsewhere than glibc it does nothing and returns false.
#[allow(unsafe_code)]
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets the allocator's parameters; both are documented
        // values (mallopt(3): 0 disables mmap for blocks, -1 disables trimming).
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, -1) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
