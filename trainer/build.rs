//! With the `cuda` feature, make `mill-train` load `libtorch_cuda.so`.
//!
//! torch-sys asks for `-ltorch_cuda`, but rustc links with `--as-needed` and our code calls
//! nothing in that library directly, so the linker drops it: the binary then NEEDs only
//! `libtorch_cpu.so`/`libc10.so`, libtorch's CUDA backend is never registered, and
//! `tch::Cuda::is_available()` is false on a machine with a GPU. Linking it with
//! `--no-as-needed` keeps it. Without the feature (the CPU build the
//! tests use) this script prints nothing but its rerun conditions.
//!
//! The libtorch folder is found as torch-sys finds it: the Python torch with
//! `LIBTORCH_USE_PYTORCH` (`python` inside a virtualenv, else `python3`), else `LIBTORCH_LIB`
//! or `LIBTORCH` (their `lib` folder), else `/usr/lib`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const LIBTORCH_LIBS: &str = r"
from torch.utils import cpp_extension
for path in cpp_extension.library_paths():
    print(path)
";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "LIBTORCH_USE_PYTORCH",
        "LIBTORCH",
        "LIBTORCH_LIB",
        "VIRTUAL_ENV",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if env::var_os("CARGO_FEATURE_CUDA").is_none()
        || env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
    {
        return;
    }
    let candidates = libtorch_lib_dirs();
    match candidates
        .iter()
        .find(|dir| dir.join("libtorch_cuda.so").exists())
    {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-arg-bins=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        }
        None => println!(
            "cargo:warning=feature `cuda`: no libtorch_cuda.so in {candidates:?}; \
             mill-train will not see the GPU"
        ),
    }
}

fn libtorch_lib_dirs() -> Vec<PathBuf> {
    if env::var_os("LIBTORCH_USE_PYTORCH").is_some() {
        let python = if env::var_os("VIRTUAL_ENV").is_some() {
            "python"
        } else {
            "python3"
        };
        return match Command::new(python).arg("-c").arg(LIBTORCH_LIBS).output() {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| PathBuf::from(line.trim()))
                .collect(),
            _ => Vec::new(),
        };
    }
    if let Some(lib) = env::var_os("LIBTORCH_LIB").or_else(|| env::var_os("LIBTORCH")) {
        return vec![PathBuf::from(lib).join("lib")];
    }
    vec![PathBuf::from("/usr/lib")]
}
