//! The memory a generated VM and a cloned one cost, counted by a global allocator of this
//! test binary (the bytes live after generating an inventory, less those of a model without
//! the VMs; the bytes a run of clones adds), so a change that makes every VM bigger again
//! fails here and not only in `bench vsphere`.

use infrasim_vsphere_sim::inventory::generate;
use infrasim_vsphere_sim::{Model, SimConfig, Simulator};
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

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

/// Bytes live per clone of a VM, over `clones` clones made after `warm` others (the first
/// ones fill the bounded task and event histories).
async fn live_per_clone(warm: usize, clones: usize) -> usize {
    let config = SimConfig {
        password: "pw".into(),
        ..SimConfig::default()
    };
    let s = Simulator::new(config, infrasim_clock::SystemClock::shared());
    let login = r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#;
    let r = s.handle(&envelope(login), None, "test").await;
    let cookie = r.set_cookie.expect("login sets the session cookie");
    let cookie = cookie.split(';').next().unwrap_or_default().to_string();
    let (template, folder) = s.with_inventory(|inv| {
        let vm = inv.iter().find(|o| o.moref.ty == "VirtualMachine").unwrap();
        let folder = vm.props["parent"].as_mor().unwrap().value.clone();
        (vm.moref.value.clone(), folder)
    });
    let mut before = 0;
    for i in 0..warm + clones {
        if i == warm {
            before = LIVE.load(Ordering::Relaxed);
        }
        let clone = format!(
            r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{template}</_this><folder type="Folder">{folder}</folder><name>clone-{i}</name><spec><location/><powerOn>false</powerOn><template>false</template></spec></CloneVM_Task>"#
        );
        let r = s.handle(&envelope(&clone), Some(&cookie), "test").await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    (LIVE.load(Ordering::Relaxed) - before) / clones
}

// One test only: the counter is the whole binary's, and a second test running beside this
// one would count its own allocations here.
#[tokio::test]
async fn a_generated_vm_costs_a_few_kilobytes() {
    let (small, large) = (live_after(0), live_after(1000));
    let per_vm = (large - small) / 2000;
    println!("{per_vm} bytes per VM");
    assert!(per_vm < 5000, "{per_vm} bytes per generated VM");
    let per_clone = live_per_clone(1200, 1000).await;
    println!("{per_clone} bytes per clone");
    // A clone is a VM, its task (the oldest dropped past the bound) and its event.
    assert!(per_clone < 9000, "{per_clone} bytes per clone");
}
