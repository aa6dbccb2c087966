//! Where a training process stands among its peers: the one place that reads every
//! engine's variables, for `mill-train` (one process per rank) and for `mill` (which
//! starts a node's ranks itself where the engine starts one process per node).
//!
//! A process started per rank by a launcher reads [`World::from_vars`]:
//! - torchrun: `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`;
//! - Slurm's `srun`: `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`; the master is the
//!   first host of `SLURM_JOB_NODELIST` unless `MASTER_ADDR` says otherwise.
//!
//! A process started per node reads [`Node::from_vars`] and starts `per_node` ranks:
//! - AWS Batch multi-node parallel jobs: `AWS_BATCH_JOB_NODE_INDEX`,
//!   `AWS_BATCH_JOB_NUM_NODES`, master `AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS`
//!   (Batch sets it on the other nodes only: the main node is its own master);
//! - Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX`, `TOKENMILL_NODES`, `MASTER_ADDR`
//!   (index 0's DNS name behind the job's headless Service);
//! - anywhere: `TOKENMILL_GPUS_PER_NODE` ranks per node (default 1).
//!
//! Rank `r` of node `n` is `n * per_node + r`, so ranks are contiguous per node, as
//! Slurm numbers them.

use crate::error::{Error, Result};

/// The rendezvous port when `MASTER_PORT` is unset (torchrun's default).
pub const DEFAULT_PORT: u16 = 29500;

/// Where this process stands among the training processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    pub rank: usize,
    pub size: usize,
    /// Rank on this machine: the GPU this process drives.
    pub local_rank: usize,
    /// `host:port` of rank 0's rendezvous.
    pub master: String,
}

/// A variable parsed as a non-negative integer, if set.
fn num(var: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    var(name)
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| Error::Usage(format!("{name}={v:?} is not a non-negative integer")))
        })
        .transpose()
}

fn port(var: &impl Fn(&str) -> Option<String>) -> Result<u16> {
    match var("MASTER_PORT") {
        None => Ok(DEFAULT_PORT),
        Some(p) => p
            .trim()
            .parse::<u16>()
            .map_err(|_| Error::Usage(format!("MASTER_PORT={p:?} is not a port"))),
    }
}

impl World {
    /// One process alone.
    pub fn single() -> World {
        World {
            rank: 0,
            size: 1,
            local_rank: 0,
            master: String::new(),
        }
    }

    /// From torchrun's variables, else Slurm's, else one process. `var` reads a
    /// variable (the environment, or a map in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<World> {
        let (rank, size, local, addr) = if let Some(size) = num(&var, "WORLD_SIZE")? {
            (
                num(&var, "RANK")?.unwrap_or(0),
                size,
                num(&var, "LOCAL_RANK")?,
                var("MASTER_ADDR"),
            )
        } else if let Some(size) = num(&var, "SLURM_NTASKS")? {
            let first = var("SLURM_JOB_NODELIST")
                .or_else(|| var("SLURM_NODELIST"))
                .and_then(|l| first_host(&l));
            (
                num(&var, "SLURM_PROCID")?.unwrap_or(0),
                size,
                num(&var, "SLURM_LOCALID")?,
                var("MASTER_ADDR").or(first),
            )
        } else {
            return Ok(World::single());
        };
        if size == 0 || rank >= size {
            return Err(Error::Usage(format!(
                "rank {rank} of a world of {size} processes"
            )));
        }
        let addr = addr.unwrap_or_else(|| "127.0.0.1".into());
        Ok(World {
            rank,
            size,
            local_rank: local.unwrap_or(rank),
            master: format!("{addr}:{}", port(&var)?),
        })
    }

    /// [`World::from_vars`] on this process's environment.
    pub fn from_env() -> Result<World> {
        World::from_vars(|k| std::env::var(k).ok())
    }

    /// The torchrun variables that make a child process this rank.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        let (addr, port) = self
            .master
            .rsplit_once(':')
            .unwrap_or((self.master.as_str(), ""));
        vec![
            ("RANK", self.rank.to_string()),
            ("WORLD_SIZE", self.size.to_string()),
            ("LOCAL_RANK", self.local_rank.to_string()),
            ("MASTER_ADDR", addr.to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
    }
}

/// A machine of a multi-node job whose engine starts one process per node: that
/// process starts the node's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub index: usize,
    pub nodes: usize,
    /// Ranks (GPUs) per node.
    pub per_node: usize,
    /// Rank 0's host.
    pub master_addr: String,
    pub master_port: u16,
}

impl Node {
    /// This node from the engine's variables; `None` where a launcher already started
    /// one process per rank (`WORLD_SIZE`, or `srun` with more than one task).
    /// `per_node` is the step's setting when `TOKENMILL_GPUS_PER_NODE` is unset.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        per_node: usize,
    ) -> Result<Option<Node>> {
        if var("WORLD_SIZE").is_some() || num(&var, "SLURM_NTASKS")?.is_some_and(|n| n > 1) {
            return Ok(None);
        }
        let per_node = num(&var, "TOKENMILL_GPUS_PER_NODE")?
            .unwrap_or(per_node)
            .max(1);
        let (index, nodes, addr) = if let Some(nodes) = num(&var, "AWS_BATCH_JOB_NUM_NODES")? {
            (
                num(&var, "AWS_BATCH_JOB_NODE_INDEX")?.unwrap_or(0),
                nodes,
                var("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"),
            )
        } else if let Some(nodes) = num(&var, "TOKENMILL_NODES")? {
            (
                num(&var, "JOB_COMPLETION_INDEX")?.unwrap_or(0),
                nodes,
                var("MASTER_ADDR"),
            )
        } else {
            (0, 1, var("MASTER_ADDR"))
        };
        if nodes == 0 || index >= nodes {
            return Err(Error::Usage(format!("node {index} of {nodes} nodes")));
        }
        Ok(Some(Node {
            index,
            nodes,
            per_node,
            // The main node of a Batch job has no address variable: it is the master.
            master_addr: addr.unwrap_or_else(|| "127.0.0.1".into()),
            master_port: port(&var)?,
        }))
    }

    /// [`Node::from_vars`] on this process's environment.
    pub fn from_env(per_node: usize) -> Result<Option<Node>> {
        Node::from_vars(|k| std::env::var(k).ok(), per_node)
    }

    /// Every rank of the job.
    pub fn size(&self) -> usize {
        self.nodes * self.per_node
    }

    /// The ranks this node runs, in order.
    pub fn ranks(&self) -> Vec<World> {
        (0..self.per_node)
            .map(|local| World {
                rank: self.index * self.per_node + local,
                size: self.size(),
                local_rank: local,
                master: format!("{}:{}", self.master_addr, self.master_port),
            })
            .collect()
    }
}

/// The first host of a Slurm host list: `gpu[07-09,12],cpu1` → `gpu07`.
pub fn first_host(list: &str) -> Option<String> {
    let list = list.trim();
    // The first entry ends at a comma outside brackets.
    let mut depth = 0usize;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let entry = &list[..end];
    let host = match entry.split_once('[') {
        None => entry.to_string(),
        Some((prefix, rest)) => {
            let (ranges, suffix) = rest.split_once(']')?;
            let first = ranges.split(',').next()?;
            let low = first.split('-').next()?;
            format!("{prefix}{low}{suffix}")
        }
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn ranks_come_from_torchrun_then_slurm_variables() -> Result<()> {
        assert_eq!(World::from_vars(vars(&[]))?, World::single());
        let w = World::from_vars(vars(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "1234"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
        ]))?;
        assert_eq!((w.rank, w.size, w.local_rank), (3, 8, 1));
        assert_eq!(w.master, "node1:1234");
        let w = World::from_vars(vars(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_NODELIST", "gpu-[07-08]"),
        ]))?;
        assert_eq!((w.rank, w.size, w.local_rank), (3, 4, 1));
        assert_eq!(w.master, "gpu-07:29500");
        let err = World::from_vars(vars(&[("RANK", "2"), ("WORLD_SIZE", "2")]))
            .expect_err("rank out of range");
        assert!(err.to_string().contains("rank 2"), "{err}");
        assert!(World::from_vars(vars(&[("WORLD_SIZE", "two")])).is_err());
        Ok(())
    }

    #[test]
    fn a_node_starts_its_ranks_on_batch_and_kubernetes() -> Result<()> {
        // AWS Batch, node 1 of 2, 8 GPUs each: ranks 8..15.
        let n = Node::from_vars(
            vars(&[
                ("AWS_BATCH_JOB_NODE_INDEX", "1"),
                ("AWS_BATCH_JOB_NUM_NODES", "2"),
                ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "10.0.3.4"),
                ("TOKENMILL_GPUS_PER_NODE", "8"),
            ]),
            1,
        )?
        .expect("a node");
        let ranks = n.ranks();
        assert_eq!(ranks.len(), 8);
        assert_eq!(
            (ranks[0].rank, ranks[0].size, ranks[0].local_rank),
            (8, 16, 0)
        );
        assert_eq!((ranks[7].rank, ranks[7].local_rank), (15, 7));
        assert_eq!(ranks[3].master, "10.0.3.4:29500");
        // The main node has no address variable: it is the master.
        let main = Node::from_vars(
            vars(&[
                ("AWS_BATCH_JOB_NODE_INDEX", "0"),
                ("AWS_BATCH_JOB_NUM_NODES", "2"),
            ]),
            8,
        )?
        .expect("a node");
        assert_eq!(main.ranks()[0].master, "127.0.0.1:29500");
        assert_eq!(main.size(), 16);
        // Kubernetes: the completion index and the manifest's variables.
        let k = Node::from_vars(
            vars(&[
                ("JOB_COMPLETION_INDEX", "1"),
                ("TOKENMILL_NODES", "2"),
                ("TOKENMILL_GPUS_PER_NODE", "2"),
                ("MASTER_ADDR", "run-model-0.run-model"),
                ("MASTER_PORT", "29400"),
            ]),
            1,
        )?
        .expect("a node");
        let r = k.ranks();
        assert_eq!((r[1].rank, r[1].size), (3, 4));
        assert_eq!(
            r[1].vars()[3],
            ("MASTER_ADDR", "run-model-0.run-model".to_string())
        );
        assert_eq!(r[1].vars()[4], ("MASTER_PORT", "29400".to_string()));
        // A child with these variables reads the same rank back.
        let child = r[1].vars();
        let back =
            World::from_vars(|k| child.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))?;
        assert_eq!(back, r[1]);
        // Alone: one node, the step's GPUs; under srun or torchrun: no node launcher.
        let alone = Node::from_vars(vars(&[]), 2)?.expect("a node");
        assert_eq!((alone.nodes, alone.per_node, alone.size()), (1, 2, 2));
        assert!(Node::from_vars(vars(&[("SLURM_NTASKS", "4")]), 2)?.is_none());
        assert!(Node::from_vars(vars(&[("WORLD_SIZE", "4")]), 2)?.is_none());
        assert!(Node::from_vars(vars(&[("SLURM_NTASKS", "1")]), 1)?.is_some());
        assert!(
            Node::from_vars(
                vars(&[("TOKENMILL_NODES", "2"), ("JOB_COMPLETION_INDEX", "2")]),
                1
            )
            .is_err()
        );
        Ok(())
    }

    #[test]
    fn first_hosts_of_slurm_host_lists() {
        assert_eq!(first_host("node1").as_deref(), Some("node1"));
        assert_eq!(first_host("node[1-3]").as_deref(), Some("node1"));
        assert_eq!(first_host("gpu[07-09,12],cpu1").as_deref(), Some("gpu07"));
        assert_eq!(first_host("a[3,5]-ib").as_deref(), Some("a3-ib"));
        assert_eq!(first_host("x1,x2").as_deref(), Some("x1"));
        assert_eq!(first_host(""), None);
        assert_eq!(first_host("bad[1-2"), None);
    }
}
