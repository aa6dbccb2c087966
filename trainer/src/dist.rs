//! Data parallelism: one process per device, each reading every `world`-th sample,
//! gradients averaged across processes after each micro-batch accumulation.
//!
//! The rank and world size come from the launcher's variables, read in one place for
//! every engine ([`pipeline::world`]): torchrun's, Slurm's `srun`, or those `mill` sets
//! for the ranks it starts on an AWS Batch or Kubernetes node. Processes meet over TCP
//! at the master's port: rank 0 listens on every address, the others connect to the
//! master's address. On CPU the same connections carry the gradients ([`TcpGroup`]: rank 0 sums them in rank order and sends the mean
//! back, so every rank applies the same update); on GPUs, NCCL does (the `cuda`
//! feature, `nccl.rs`), and the TCP connections only carry NCCL's id.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tch::{Kind, Tensor};

use pipeline::{Error, Result};

pub use pipeline::world::World;

/// Averages tensors across the training processes.
pub trait Group: Send {
    fn world(&self) -> &World;
    /// Replaces each tensor (f32) by its mean over the ranks, identical on every rank.
    fn all_reduce_mean(&mut self, tensors: &mut [Tensor]) -> Result<()>;
}

/// Gradients over TCP through rank 0: for CPU training with several processes (and
/// the test that 2 ranks equal 1).
#[derive(Debug)]
pub struct TcpGroup {
    world: World,
    /// Rank 0: a connection to each other rank, in rank order. Others: to rank 0.
    peers: Vec<TcpStream>,
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::Usage(format!("data parallel: {what}: {e}"))
}

fn send(stream: &mut TcpStream, bytes: &[u8], peer: usize) -> Result<()> {
    stream
        .write_all(&(bytes.len() as u64).to_le_bytes())
        .and_then(|_| stream.write_all(bytes))
        .map_err(|e| io_err(&format!("sending to rank {peer}"), e))
}

fn receive(stream: &mut TcpStream, peer: usize) -> Result<Vec<u8>> {
    let mut len = [0u8; 8];
    stream
        .read_exact(&mut len)
        .map_err(|e| io_err(&format!("receiving from rank {peer}"), e))?;
    let len = u64::from_le_bytes(len) as usize;
    let mut bytes = vec![0u8; len];
    stream
        .read_exact(&mut bytes)
        .map_err(|e| io_err(&format!("receiving from rank {peer}"), e))?;
    Ok(bytes)
}

impl TcpGroup {
    /// Meets the other ranks at `world.master` (rank 0 listens; the others retry for
    /// up to `timeout` until it does).
    pub fn connect(world: &World, timeout: Duration) -> Result<TcpGroup> {
        let mut peers = Vec::new();
        if world.size > 1 && world.rank == 0 {
            // Every address at the master's port: the master's name may resolve to an
            // address other processes reach but this one does not hold by that name.
            let port = world.master.rsplit_once(':').map_or("", |(_, p)| p);
            let any = if world.master.starts_with('[') {
                format!("[::]:{port}")
            } else {
                format!("0.0.0.0:{port}")
            };
            let listener = TcpListener::bind(&any)
                .map_err(|e| io_err(&format!("listening on {any} (master {})", world.master), e))?;
            let mut by_rank: Vec<Option<TcpStream>> = (0..world.size).map(|_| None).collect();
            for _ in 1..world.size {
                let (mut s, _) = listener
                    .accept()
                    .map_err(|e| io_err("accepting a rank", e))?;
                s.set_nodelay(true)
                    .map_err(|e| io_err("socket option", e))?;
                let hello = receive(&mut s, usize::MAX)?;
                let rank = hello
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes)
                    .unwrap_or(u64::MAX) as usize;
                if rank == 0 || rank >= world.size || by_rank[rank].is_some() {
                    return Err(Error::Usage(format!(
                        "data parallel: a process announced rank {rank} (world {})",
                        world.size
                    )));
                }
                by_rank[rank] = Some(s);
            }
            peers = by_rank.into_iter().flatten().collect();
        } else if world.size > 1 {
            let started = Instant::now();
            let mut s = loop {
                match TcpStream::connect(&world.master) {
                    Ok(s) => break s,
                    Err(e) if started.elapsed() > timeout => {
                        return Err(io_err(
                            &format!("connecting to rank 0 at {}", world.master),
                            e,
                        ));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            s.set_nodelay(true)
                .map_err(|e| io_err("socket option", e))?;
            send(&mut s, &(world.rank as u64).to_le_bytes(), 0)?;
            peers.push(s);
        }
        Ok(TcpGroup {
            world: world.clone(),
            peers,
        })
    }

    /// Rank 0's `bytes` on every rank (NCCL's id travels this way).
    pub fn broadcast(&mut self, bytes: &[u8]) -> Result<Vec<u8>> {
        if self.world.rank == 0 {
            for (i, p) in self.peers.iter_mut().enumerate() {
                send(p, bytes, i + 1)?;
            }
            Ok(bytes.to_vec())
        } else if let Some(p) = self.peers.first_mut() {
            receive(p, 0)
        } else {
            Ok(bytes.to_vec())
        }
    }
}

fn tch(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

/// The tensors' values, back to back, as f32 on the CPU.
pub fn flatten(tensors: &[Tensor]) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for t in tensors {
        let flat = t
            .f_to_kind(Kind::Float)
            .map_err(tch)?
            .f_to_device(tch::Device::Cpu)
            .map_err(tch)?
            .f_reshape([-1])
            .map_err(tch)?;
        let values: Vec<f32> = Vec::try_from(&flat).map_err(tch)?;
        out.extend(values);
    }
    Ok(out)
}

/// Writes `values` back into `tensors` (the inverse of [`flatten`]).
pub fn unflatten(values: &[f32], tensors: &mut [Tensor]) -> Result<()> {
    let _guard = tch::no_grad_guard();
    let mut at = 0;
    for t in tensors.iter_mut() {
        let n = t.numel();
        let part = values.get(at..at + n).ok_or_else(|| {
            Error::Usage("data parallel: fewer values than tensor elements".into())
        })?;
        let source = Tensor::f_from_slice(part)
            .map_err(tch)?
            .f_view(t.size().as_slice())
            .map_err(tch)?;
        t.f_copy_(&source).map_err(tch)?;
        at += n;
    }
    Ok(())
}

fn to_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8], peer: usize) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Error::Usage(format!(
            "data parallel: rank {peer} sent {} bytes, not f32 values",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

impl Group for TcpGroup {
    fn world(&self) -> &World {
        &self.world
    }

    fn all_reduce_mean(&mut self, tensors: &mut [Tensor]) -> Result<()> {
        if self.world.size < 2 {
            return Ok(());
        }
        let mine = flatten(tensors)?;
        let mean = if self.world.rank == 0 {
            // Summed in rank order, so the result does not depend on arrival order.
            let mut sum = mine;
            for (i, p) in self.peers.iter_mut().enumerate() {
                let theirs = from_bytes(&receive(p, i + 1)?, i + 1)?;
                if theirs.len() != sum.len() {
                    return Err(Error::Usage(format!(
                        "data parallel: rank {} sent {} values, rank 0 has {}: another model",
                        i + 1,
                        theirs.len(),
                        sum.len()
                    )));
                }
                for (s, t) in sum.iter_mut().zip(theirs) {
                    *s += t;
                }
            }
            let n = self.world.size as f32;
            for s in sum.iter_mut() {
                *s /= n;
            }
            let bytes = to_bytes(&sum);
            for (i, p) in self.peers.iter_mut().enumerate() {
                send(p, &bytes, i + 1)?;
            }
            sum
        } else {
            let p = self
                .peers
                .first_mut()
                .ok_or_else(|| Error::Usage("data parallel: not connected to rank 0".into()))?;
            send(p, &to_bytes(&mine), 0)?;
            from_bytes(&receive(p, 0)?, 0)?
        };
        unflatten(&mean, tensors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_all_reduce_gives_every_rank_the_mean() -> Result<()> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| io_err("a free port", e))?
            .port();
        let handles: Vec<_> = (0..3)
            .map(|rank| {
                let world = World {
                    rank,
                    size: 3,
                    local_rank: rank,
                    master: format!("127.0.0.1:{port}"),
                };
                std::thread::spawn(move || -> Result<Vec<f32>> {
                    let mut g = TcpGroup::connect(&world, Duration::from_secs(20))?;
                    let id = g.broadcast(b"nccl-id")?;
                    assert_eq!(id, b"nccl-id");
                    let r = rank as f32;
                    let mut t = vec![
                        Tensor::from_slice(&[r, 2.0 * r]),
                        Tensor::from_slice(&[10.0 + r]),
                    ];
                    g.all_reduce_mean(&mut t)?;
                    flatten(&t)
                })
            })
            .collect();
        for h in handles {
            let got = h
                .join()
                .map_err(|_| Error::Usage("rank panicked".into()))??;
            assert_eq!(got, vec![1.0, 2.0, 11.0]);
        }
        Ok(())
    }
}
