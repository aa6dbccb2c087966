//! Gradients averaged on the GPUs with NCCL (feature `cuda`), through the `cudarc`
//! crate's bindings on the tensors' device pointers. tch has no process group, so the
//! ranks meet over TCP ([`TcpGroup`]) only to share rank 0's NCCL id; NCCL then runs
//! the all-reduce. libtorch's work is finished (device synchronised) before NCCL reads
//! the gradients, and NCCL's before libtorch reads them back.

use std::time::Duration;

use cudarc::nccl::{result, sys};
use tch::{Device, Kind, Tensor};

use pipeline::{Error, Result};

use crate::dist::{Group, TcpGroup, World};

fn nccl_err(what: &str, e: result::NcclError) -> Error {
    Error::Usage(format!("NCCL {what}: {e:?}"))
}

/// A NCCL communicator over all ranks, one GPU each (`LOCAL_RANK`).
pub struct NcclGroup {
    world: World,
    device: Device,
    ordinal: usize,
    comm: sys::ncclComm_t,
    /// Kept open for the run: the rendezvous connections.
    _tcp: TcpGroup,
}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclGroup")
            .field("world", &self.world)
            .field("device", &self.device)
            .finish()
    }
}

// The communicator is used from the training thread only; moving it between threads
// is allowed by NCCL.
unsafe impl Send for NcclGroup {}

impl NcclGroup {
    /// Joins the ranks of `world`, this one driving GPU `world.local_rank`.
    pub fn connect(world: &World, timeout: Duration) -> Result<NcclGroup> {
        let ordinal = world.local_rank;
        cudarc::runtime::result::device::set(ordinal as i32)
            .map_err(|e| Error::Usage(format!("selecting GPU {ordinal}: {e:?}")))?;
        let mut tcp = TcpGroup::connect(world, timeout)?;
        let mine = if world.rank == 0 {
            result::get_uniqueid().map_err(|e| nccl_err("unique id", e))?
        } else {
            sys::ncclUniqueId { internal: [0; 128] }
        };
        let bytes: Vec<u8> = mine.internal.iter().map(|&c| c as u8).collect();
        let shared = tcp.broadcast(&bytes)?;
        if shared.len() != 128 {
            return Err(Error::Usage(format!(
                "NCCL id of {} bytes from rank 0",
                shared.len()
            )));
        }
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        for (d, s) in id.internal.iter_mut().zip(&shared) {
            *d = *s as core::ffi::c_char;
        }
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `comm` is written by NCCL; every rank passes the same id and world.
        unsafe { result::comm_init_rank(&mut comm, world.size as i32, id, world.rank as i32) }
            .map_err(|e| nccl_err("communicator", e))?;
        Ok(NcclGroup {
            world: world.clone(),
            device: Device::Cuda(ordinal),
            ordinal,
            comm,
            _tcp: tcp,
        })
    }
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        // SAFETY: the communicator was created by `comm_init_rank` and is not used after.
        let _ = unsafe { result::comm_destroy(self.comm) };
    }
}

impl Group for NcclGroup {
    fn world(&self) -> &World {
        &self.world
    }

    fn all_reduce_mean(&mut self, tensors: &mut [Tensor]) -> Result<()> {
        let _guard = tch::no_grad_guard();
        // Contiguous f32 buffers on this GPU (the gradients already are).
        let mut buffers = Vec::with_capacity(tensors.len());
        for t in tensors.iter() {
            let ready = t.kind() == Kind::Float && t.device() == self.device && t.is_contiguous();
            buffers.push(if ready {
                t.shallow_clone()
            } else {
                t.f_to_device(self.device)
                    .and_then(|x| x.f_to_kind(Kind::Float))
                    .and_then(|x| x.f_contiguous())
                    .map_err(crate::tch_err)?
            });
        }
        tch::Cuda::synchronize(self.ordinal as i64);
        result::group_start().map_err(|e| nccl_err("group start", e))?;
        for b in &buffers {
            let ptr = b.data_ptr();
            // SAFETY: `ptr` addresses `numel` f32 on this rank's GPU, alive until the
            // synchronisation below; in-place all-reduce is allowed by NCCL.
            unsafe {
                result::all_reduce(
                    ptr,
                    ptr,
                    b.numel(),
                    sys::ncclDataType_t::ncclFloat32,
                    sys::ncclRedOp_t::ncclAvg,
                    self.comm,
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| nccl_err("all-reduce", e))?;
        }
        result::group_end().map_err(|e| nccl_err("group end", e))?;
        tch::Cuda::synchronize(self.ordinal as i64);
        for (t, b) in tensors.iter_mut().zip(&buffers) {
            if t.data_ptr() != b.data_ptr() {
                t.f_copy_(b).map_err(crate::tch_err)?;
            }
        }
        Ok(())
    }
}
