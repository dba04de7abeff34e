//! The memory a generated VM costs, counted by a global allocator of this test binary (the
//! bytes live after generating an inventory, less those of a model without the VMs), so a
//! change that makes every VM bigger again fails here and not only in `bench vsphere`.

use infrasim_vsphere_sim::inventory::generate;
use infrasim_vsphere_sim::Model;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes it holds for the program.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to the system allocator; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` hold for System as well.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above, that is from System, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes live after generating the model with `vms` VMs per place (kept until measured).
fn live_after(vms: usize) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let inventory = generate(
        &Model {
            vms,
            ..Model::default()
        },
        chrono::Utc::now(),
    );
    let live = LIVE.load(Ordering::Relaxed) - before;
    drop(inventory);
    live
}

// One test only: the counter is the whole binary's, and a second test running beside this
// one would count its own allocations here.
#[test]
fn a_generated_vm_costs_a_few_kilobytes() {
    let (small, large) = (live_after(0), live_after(1000));
    let per_vm = (large - small) / 2000;
    println!("{per_vm} bytes per VM");
    assert!(per_vm < 5000, "{per_vm} bytes per generated VM");
}
