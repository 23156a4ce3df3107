//! The validation workers of a pass ([`WORKERS`] threads), started and joined here
//! for the scan and the replay alike: each checks the batches the dealer deals it,
//! in turn, and hands them on to the sequencer in the same turn.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::batch::{check_batch, Batch, Checked, Compare};
use crate::contract::Contract;
use crate::error::{Error, Result};
use crate::identity::Digester;

/// Validation workers: both cores share the bulk of the work (see `validator`).
pub const WORKERS: usize = 2;

/// The validation workers of a pass: the dealer sends batch k to `txs[k % WORKERS]`,
/// and the sequencer takes it, checked, from `checked[k % WORKERS]`. With
/// `panic_last`, the last worker panics mid-file (the drill's scenario).
pub fn start_workers(
    contract: &Arc<Contract>,
    digester: Digester,
    compare: Compare,
    panic_last: bool,
) -> (
    Vec<mpsc::Sender<Batch>>,
    Vec<mpsc::Receiver<Checked>>,
    Workers,
) {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..WORKERS).map(|_| mpsc::channel::<Batch>(4)).unzip();
    let (checked, handles): (Vec<_>, Vec<_>) = rxs
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let panics = panic_last && i == WORKERS - 1;
            spawn_checker(rx, contract.clone(), digester, compare, panics)
        })
        .unzip();
    (txs, checked, Workers(handles))
}

/// The threads of [`start_workers`], joined once the sequencer is done.
pub struct Workers(Vec<tokio::task::JoinHandle<()>>);

impl Workers {
    pub async fn join(self, input: &str) -> Result<()> {
        for w in self.0 {
            w.await
                .map_err(|e| Error::internal("join validation worker", input, e))?;
        }
        Ok(())
    }
}

fn spawn_checker(
    mut rx: mpsc::Receiver<Batch>,
    contract: Arc<Contract>,
    digester: Digester,
    compare: Compare,
    panic_mid_file: bool,
) -> (mpsc::Receiver<Checked>, tokio::task::JoinHandle<()>) {
    let (tx, out) = mpsc::channel::<Checked>(4);
    let handle = tokio::task::spawn_blocking(move || {
        let mut n = 0;
        while let Some(batch) = rx.blocking_recv() {
            n += 1;
            assert!(
                !(panic_mid_file && n == 2),
                "drill: validation worker panics mid-file"
            );
            if tx
                .blocking_send(check_batch(&batch, &contract, digester, compare))
                .is_err()
            {
                return;
            }
        }
    });
    (out, handle)
}
