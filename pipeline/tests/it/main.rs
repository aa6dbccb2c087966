//! Integration tests of the `pipeline` crate.

mod proxy;
mod runner;
mod s3env;
mod shards;
mod storage;
mod tokens;
