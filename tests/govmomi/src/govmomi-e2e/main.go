// govmomi-e2e drives a vSphere endpoint the way CAPV and govc users do, through govmomi
// (Debian's golang-github-vmware-govmomi-dev), and exits non-zero on the first surprise.
//
// Usage: govmomi-e2e -url https://user:pass@127.0.0.1:8989/sdk
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/pbm"
	pbmmethods "github.com/vmware/govmomi/pbm/methods"
	pbmtypes "github.com/vmware/govmomi/pbm/types"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/cluster"
	"github.com/vmware/govmomi/vapi/library"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vapi/vcenter"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

func check(step string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", step, err)
		os.Exit(1)
	}
}

func expect(step string, ok bool, format string, args ...interface{}) {
	if !ok {
		fmt.Fprintf(os.Stderr, "FAIL %s: "+format+"\n", append([]interface{}{step}, args...)...)
		os.Exit(1)
	}
	fmt.Printf("ok %s\n", step)
}

func main() {
	raw := flag.String("url", "", "vSphere SDK URL with credentials")
	flag.Parse()
	u, err := url.Parse(*raw)
	check("parse url", err)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	c, err := govmomi.NewClient(ctx, u, true)
	check("login", err)
	about := c.ServiceContent.About
	expect("about", about.ApiType == "VirtualCenter" && strings.HasPrefix(about.ApiVersion, "8.0"), "%s %s", about.ApiType, about.ApiVersion)

	// ls-style listing with the Finder, as govc does.
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("datacenter", err)
	finder.SetDatacenter(dc)
	vms, err := finder.VirtualMachineList(ctx, "*")
	check("vm list", err)
	var names []string
	for _, vm := range vms {
		names = append(names, vm.Name())
	}
	sort.Strings(names)
	expect("ls vm", strings.Join(names, ",") == "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1,DC0_H0_VM0,DC0_H0_VM1", "%v", names)
	hosts, err := finder.HostSystemList(ctx, "*/*")
	check("host list", err)
	expect("ls host", len(hosts) == 4, "%d hosts", len(hosts))

	// object.collect-style property reads through a container view.
	m := view.NewManager(c.Client)
	cv, err := m.CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	check("container view", err)
	var mvms []mo.VirtualMachine
	check("retrieve", cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "summary", "config.hardware.device"}, &mvms))
	expect("retrieve summaries", len(mvms) == 4 && mvms[0].Summary.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn, "%d vms", len(mvms))
	_ = cv.Destroy(ctx)

	// CAPV's clone flow.
	template, err := finder.VirtualMachine(ctx, "DC0/vm/DC0_H0_VM0")
	check("find template", err)
	task, err := template.PowerOff(ctx)
	check("power off template", err)
	check("power off template wait", task.Wait(ctx))
	check("mark as template", template.MarkAsTemplate(ctx))
	folders, err := dc.Folders(ctx)
	check("folders", err)
	pool, err := finder.ResourcePool(ctx, "DC0_C0/Resources")
	check("pool", err)
	ds, err := finder.Datastore(ctx, "LocalDS_0")
	check("datastore", err)
	poolRef, dsRef := pool.Reference(), ds.Reference()
	// CAPV passes the storage policy it looked up in PBM (see storagePolicies).
	policy := []types.BaseVirtualMachineProfileSpec{
		&types.VirtualMachineDefinedProfileSpec{ProfileId: "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"},
	}
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef, Datastore: &dsRef, Profile: policy},
		PowerOn:  false,
		Template: false,
		Config: &types.VirtualMachineConfigSpec{
			NumCPUs:      2,
			MemoryMB:     2048,
			InstanceUuid: "6f0d4a9e-0000-4000-8000-000000000042",
			ExtraConfig: []types.BaseOptionValue{
				&types.OptionValue{Key: "guestinfo.userdata", Value: "I2Nsb3VkLWNvbmZpZw=="},
				&types.OptionValue{Key: "guestinfo.userdata.encoding", Value: "base64"},
			},
		},
	}
	task, err = template.Clone(ctx, folders.VmFolder, "capv-go", spec)
	check("clone", err)
	info, err := task.WaitForResult(ctx, nil)
	check("clone wait", err)
	ref, ok := info.Result.(types.ManagedObjectReference)
	expect("clone result", ok && ref.Type == "VirtualMachine", "%#v", info.Result)
	vm := object.NewVirtualMachine(c.Client, ref)

	var cloned mo.VirtualMachine
	check("read clone", vm.Properties(ctx, ref, []string{"config", "summary"}, &cloned))
	extra := map[string]string{}
	for _, o := range cloned.Config.ExtraConfig {
		ov := o.GetOptionValue()
		extra[ov.Key] = fmt.Sprint(ov.Value)
	}
	expect("clone config", cloned.Config.Hardware.NumCPU == 2 && cloned.Config.Hardware.MemoryMB == 2048 &&
		cloned.Config.InstanceUuid == "6f0d4a9e-0000-4000-8000-000000000042" && extra["guestinfo.userdata.encoding"] == "base64",
		"%+v %v", cloned.Config.Hardware, extra)

	// The policy of the clone's location is the VM's, as PBM reports it.
	storage, err := pbm.NewClient(ctx, c.Client)
	check("pbm client for the clone", err)
	assoc, err := pbmmethods.PbmQueryAssociatedProfile(ctx, storage, &pbmtypes.PbmQueryAssociatedProfile{
		This:   storage.ServiceContent.ProfileManager,
		Entity: pbmtypes.PbmServerObjectRef{ObjectType: "virtualMachine", Key: ref.Value},
	})
	check("clone storage policy", err)
	expect("clone storage policy", len(assoc.Returnval) == 1 && assoc.Returnval[0].UniqueId == "aa6d5a82-1c88-45da-85d3-3d74b91a5bad",
		"%+v", assoc.Returnval)

	task, err = vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "guestinfo.metadata", Value: "bWV0YQ=="}}})
	check("reconfigure", err)
	check("reconfigure wait", task.Wait(ctx))

	task, err = vm.PowerOn(ctx)
	check("power on", err)
	check("power on wait", task.Wait(ctx))

	// Wait for an IP in guest.net, as CAPV does.
	var ip string
	pc := property.DefaultCollector(c.Client)
	err = property.Wait(ctx, pc, ref, []string{"guest.net"}, func(changes []types.PropertyChange) bool {
		for _, ch := range changes {
			nics, _ := ch.Val.(types.ArrayOfGuestNicInfo)
			for _, nic := range nics.GuestNicInfo {
				if len(nic.IpAddress) > 0 {
					ip = nic.IpAddress[0]
					return true
				}
			}
		}
		return false
	})
	check("wait for ip", err)
	expect("guest ip", strings.HasPrefix(ip, "10."), "ip %q", ip)
	capvMachineExtras(ctx, c, u, vm)

	// Powering on twice is a task error of the right fault type.
	task, err = vm.PowerOn(ctx)
	check("power on again", err)
	_, err = task.WaitForResult(ctx, nil)
	_, isPowerState := func() (interface{}, bool) {
		if err == nil {
			return nil, false
		}
		if terr, ok := err.(taskError); ok {
			_, ok := terr.Fault().(*types.InvalidPowerState)
			return nil, ok
		}
		return nil, strings.Contains(err.Error(), "current state")
	}()
	expect("invalid power state", isPowerState, "%v", err)

	// What govc users do next: events and snapshots.
	events, err := event.NewManager(c.Client).QueryEvents(ctx, types.EventFilterSpec{
		Entity: &types.EventFilterSpecByEntity{Entity: ref, Recursion: types.EventFilterSpecRecursionOptionSelf},
	})
	check("events", err)
	var poweredOn bool
	for _, e := range events {
		if _, ok := e.(*types.VmPoweredOnEvent); ok {
			poweredOn = e.GetEvent().Vm.Vm == ref
		}
	}
	expect("events", poweredOn, "%d events, no VmPoweredOnEvent for the clone", len(events))

	task, err = vm.CreateSnapshot(ctx, "before-upgrade", "", false, false)
	check("snapshot", err)
	check("snapshot wait", task.Wait(ctx))
	snap, err := vm.FindSnapshot(ctx, "before-upgrade")
	check("find snapshot", err)
	task, err = vm.RevertToCurrentSnapshot(ctx, true)
	check("revert", err)
	check("revert wait", task.Wait(ctx))
	task, err = vm.RemoveSnapshot(ctx, "before-upgrade", false, nil)
	check("remove snapshot", err)
	check("remove snapshot wait", task.Wait(ctx))
	_, err = vm.FindSnapshot(ctx, "before-upgrade")
	expect("snapshots", snap.Type == "VirtualMachineSnapshot" && err != nil, "%v %v", snap, err)

	task, err = vm.PowerOff(ctx)
	check("power off", err)
	check("power off wait", task.Wait(ctx))
	task, err = vm.Destroy(ctx)
	check("destroy", err)
	check("destroy wait", task.Wait(ctx))
	_, err = finder.VirtualMachine(ctx, "DC0/vm/capv-go")
	expect("destroyed", err != nil, "clone still found")

	restSessions(ctx, c, u)
	storagePolicies(ctx, c)
	datastoreFiles(ctx, c)
	rc := rest.NewClient(c.Client)
	check("library rest login", rc.Login(ctx, u.User))
	contentLibrary(ctx, c, rc)
	check("library rest logout", rc.Logout(ctx))

	check("logout", c.Logout(ctx))
	fmt.Println("PASS")
}

// capvMachineExtras does the rest of what CAPV does for a machine's VM once it runs: the VM
// joins its control plane's cluster module and gets its machine's tag, both over REST.
func capvMachineExtras(ctx context.Context, c *govmomi.Client, u *url.URL, vm *object.VirtualMachine) {
	rc := rest.NewClient(c.Client)
	check("machine rest login", rc.Login(ctx, u.User))
	defer func() { _ = rc.Logout(ctx) }()
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("machine datacenter", err)
	finder.SetDatacenter(dc)
	cl, err := finder.ClusterComputeResource(ctx, "DC0_C0")
	check("machine cluster", err)
	modules := cluster.NewManager(rc)
	module, err := modules.CreateModule(ctx, cl)
	check("machine module", err)
	added, err := modules.AddModuleMembers(ctx, module, vm)
	check("machine module member", err)
	m := tags.NewManager(rc)
	category, err := m.CreateCategory(ctx, &tags.Category{Name: "capv-machine", Cardinality: "MULTIPLE", AssociableTypes: []string{"VirtualMachine"}})
	check("machine tag category", err)
	tag, err := m.CreateTag(ctx, &tags.Tag{Name: "capv-go", CategoryID: category})
	check("machine tag", err)
	check("machine tag attach", m.AttachTag(ctx, tag, vm))
	attached, err := m.GetAttachedTags(ctx, vm)
	check("machine tags", err)
	expect("machine module and tag", added && len(attached) == 1 && attached[0].Name == "capv-go", "%v %+v", added, attached)
	check("machine module delete", modules.DeleteModule(ctx, module))
	check("machine tag category delete", m.DeleteCategory(ctx, &tags.Category{ID: category}))
}

// datastoreFiles uploads a file to a datastore and downloads it again, as govc
// datastore.upload/download and CAPV's ISO and OVF handling do.
func datastoreFiles(ctx context.Context, c *govmomi.Client) {
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("files datacenter", err)
	finder.SetDatacenter(dc)
	ds, err := finder.Datastore(ctx, "LocalDS_0")
	check("files datastore", err)
	content := "#cloud-config\nhostname: capv-go\n"
	check("upload", ds.Upload(ctx, strings.NewReader(content), "seeds/user-data", &soap.DefaultUpload))
	r, _, err := ds.Download(ctx, "seeds/user-data", &soap.DefaultDownload)
	check("download", err)
	got, err := io.ReadAll(r)
	_ = r.Close()
	check("download read", err)
	expect("datastore file round trip", string(got) == content, "%q", got)
	_, _, err = ds.Download(ctx, "seeds/missing", &soap.DefaultDownload)
	expect("missing datastore file", err != nil, "downloaded")

	// govc datastore.ls: the browser lists the uploaded file, and the VMs' files below.
	browser, err := ds.Browser(ctx)
	check("datastore browser", err)
	task, err := browser.SearchDatastore(ctx, "[LocalDS_0] seeds", &types.HostDatastoreBrowserSearchSpec{MatchPattern: []string{"*"}})
	check("search datastore", err)
	info, err := task.WaitForResult(ctx, nil)
	check("search datastore wait", err)
	found, _ := info.Result.(types.HostDatastoreBrowserSearchResults)
	expect("datastore ls", len(found.File) == 1 && found.File[0].GetFileInfo().Path == "user-data", "%+v", info.Result)
	task, err = browser.SearchDatastoreSubFolders(ctx, "[LocalDS_0]", &types.HostDatastoreBrowserSearchSpec{MatchPattern: []string{"*.vmx"}})
	check("search subfolders", err)
	info, err = task.WaitForResult(ctx, nil)
	check("search subfolders wait", err)
	all, _ := info.Result.(types.ArrayOfHostDatastoreBrowserSearchResults)
	var vmx int
	for _, r := range all.HostDatastoreBrowserSearchResults {
		for _, f := range r.File {
			if strings.HasSuffix(f.GetFileInfo().Path, ".vmx") {
				vmx++
			}
		}
	}
	expect("datastore ls -R", vmx > 0, "%+v", all)
	task, err = browser.SearchDatastore(ctx, "[LocalDS_0] no-such-folder", nil)
	check("search missing folder", err)
	_, err = task.WaitForResult(ctx, nil)
	expect("missing folder", err != nil, "found")
}

// contentLibraryOVF is the descriptor uploaded to the library: one VM with 2 CPUs and 1 GiB.
const contentLibraryOVF = `<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData">
  <VirtualSystem ovf:id="ubuntu-template">
    <VirtualHardwareSection>
      <Item><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
      <Item><rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits><rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>1024</rasd:VirtualQuantity></Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
`

// contentLibrary does what govc library.create/import/deploy and CAPV's OVF templates do: a
// local library on a datastore, an OVF item uploaded through an update session, listed and
// found, deployed as a VM into a pool and folder, then the item and library deleted.
func contentLibrary(ctx context.Context, c *govmomi.Client, rc *rest.Client) {
	m := library.NewManager(rc)
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("library datacenter", err)
	finder.SetDatacenter(dc)
	ds, err := finder.Datastore(ctx, "LocalDS_0")
	check("library datastore", err)
	backing := []library.StorageBackings{{DatastoreID: ds.Reference().Value, Type: "DATASTORE"}}
	libID, err := m.CreateLibrary(ctx, library.Library{Name: "capv-templates", Type: "LOCAL", Storage: backing})
	check("create library", err)
	lib, err := m.GetLibraryByID(ctx, libID)
	check("get library", err)
	expect("library created", lib.Name == "capv-templates" && len(lib.Storage) == 1 && lib.Storage[0].DatastoreID == ds.Reference().Value, "%+v", lib)

	itemID, err := m.CreateLibraryItem(ctx, library.Item{Name: "ubuntu", LibraryID: libID, Type: library.ItemTypeOVF})
	check("create library item", err)
	session, err := m.CreateLibraryItemUpdateSession(ctx, library.Session{LibraryItemID: itemID})
	check("create update session", err)
	file, err := m.AddLibraryItemFile(ctx, session, library.UpdateFile{Name: "ubuntu.ovf", SourceType: "PUSH", Size: int64(len(contentLibraryOVF))})
	check("add library file", err)
	target, err := url.Parse(file.UploadEndpoint.URI)
	check("upload endpoint", err)
	upload := soap.DefaultUpload
	upload.ContentLength = int64(len(contentLibraryOVF))
	check("upload library file", c.Client.Upload(ctx, strings.NewReader(contentLibraryOVF), target, &upload))
	uploaded, err := m.GetLibraryItemUpdateSessionFile(ctx, session, "ubuntu.ovf")
	check("get session file", err)
	expect("library file uploaded", uploaded.Status == "READY" && uploaded.BytesTransferred == int64(len(contentLibraryOVF)), "%+v", uploaded)
	check("complete update session", m.CompleteLibraryItemUpdateSession(ctx, session))
	s, err := m.GetLibraryItemUpdateSession(ctx, session)
	check("get update session", err)
	expect("library session completed", s.State == "DONE" && s.LibraryItemID == itemID, "%+v", s)

	ids, err := m.ListLibraries(ctx)
	check("list libraries", err)
	found, err := m.FindLibrary(ctx, library.Find{Name: "capv-templates"})
	check("find library", err)
	items, err := m.GetLibraryItems(ctx, libID)
	check("library items", err)
	foundItems, err := m.FindLibraryItems(ctx, library.FindItem{LibraryID: libID, Name: "ubuntu"})
	check("find library items", err)
	expect("library listed", len(ids) == 1 && ids[0] == libID && len(found) == 1 && found[0] == libID &&
		len(items) == 1 && len(foundItems) == 1 && foundItems[0] == itemID, "%v %v %+v %v", ids, found, items, foundItems)
	item, err := m.GetLibraryItem(ctx, itemID)
	check("get library item", err)
	expect("library item", item.Type == "ovf" && item.Size == int64(len(contentLibraryOVF)) && item.Name == "ubuntu", "%+v", item)

	pool, err := finder.ResourcePool(ctx, "DC0_C0/Resources")
	check("library pool", err)
	folders, err := dc.Folders(ctx)
	check("library folders", err)
	folder, err := folders.VmFolder.CreateFolder(ctx, "from-library")
	check("library vm folder", err)
	deploy := vcenter.Deploy{
		DeploymentSpec: vcenter.DeploymentSpec{Name: "capv-ovf", AcceptAllEULA: true},
		Target:         vcenter.Target{ResourcePoolID: pool.Reference().Value, FolderID: folder.Reference().Value},
	}
	ref, err := vcenter.NewManager(rc).DeployLibraryItem(ctx, itemID, deploy)
	check("deploy library item", err)
	expect("ovf deployed", ref.Type == "VirtualMachine", "%+v", ref)
	// An absolute path: the finder reads a relative one from the datacenter's VM folder.
	vm, err := finder.VirtualMachine(ctx, "/DC0/vm/from-library/capv-ovf")
	check("find deployed vm", err)
	var deployed mo.VirtualMachine
	check("read deployed vm", vm.Properties(ctx, vm.Reference(), []string{"config.hardware", "resourcePool"}, &deployed))
	expect("deployed vm", vm.Reference() == *ref && deployed.ResourcePool != nil && *deployed.ResourcePool == pool.Reference() &&
		deployed.Config.Hardware.NumCPU == 2 && deployed.Config.Hardware.MemoryMB == 1024, "%v %+v", vm.Reference(), deployed.Config)

	check("delete library item", m.DeleteLibraryItem(ctx, item))
	_, err = m.GetLibraryItem(ctx, itemID)
	expect("library item deleted", err != nil, "item still there")
	check("delete library", m.DeleteLibrary(ctx, lib))
	ids, err = m.ListLibraries(ctx)
	check("list libraries after delete", err)
	expect("library deleted", len(ids) == 0, "%v", ids)
}

// storagePolicies looks a storage policy up by name and checks the datastores against it,
// as CAPV does before it clones a VM with a policy.
func storagePolicies(ctx context.Context, c *govmomi.Client) {
	pc, err := pbm.NewClient(ctx, c.Client)
	check("pbm client", err)
	id, err := pc.ProfileIDByName(ctx, "vSAN Default Storage Policy")
	check("pbm profile by name", err)
	expect("pbm default policy", id == "aa6d5a82-1c88-45da-85d3-3d74b91a5bad", "%q", id)
	_, err = pc.ProfileIDByName(ctx, "no such policy")
	expect("pbm unknown policy", err != nil, "found")

	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("pbm datacenter", err)
	finder.SetDatacenter(dc)
	datastores, err := finder.DatastoreList(ctx, "*")
	check("pbm datastores", err)
	var hubs []pbmtypes.PbmPlacementHub
	for _, ds := range datastores {
		hubs = append(hubs, pbmtypes.PbmPlacementHub{HubType: ds.Reference().Type, HubId: ds.Reference().Value})
	}
	req := []pbmtypes.BasePbmPlacementRequirement{
		&pbmtypes.PbmPlacementCapabilityProfileRequirement{ProfileId: pbmtypes.PbmProfileId{UniqueId: id}},
	}
	result, err := pc.CheckRequirements(ctx, hubs, nil, req)
	check("pbm check requirements", err)
	compatible := result.CompatibleDatastores()
	expect("pbm compatible datastores", len(hubs) > 0 && len(compatible) == len(hubs) && compatible[0].HubId == hubs[0].HubId, "%+v of %+v", compatible, hubs)
}

// restSessions logs in to the REST (vAPI) endpoint as CAPV does (basic credentials), reads
// the session, logs out, and opens another REST session with the SOAP session alone, as
// govc does with a saved SOAP session.
func restSessions(ctx context.Context, c *govmomi.Client, u *url.URL) {
	rc := rest.NewClient(c.Client)
	check("rest login", rc.Login(ctx, u.User))
	s, err := rc.Session(ctx)
	check("rest session", err)
	expect("rest session user", s != nil && s.User == u.User.Username(), "%+v", s)
	check("rest logout", rc.Logout(ctx))
	s, err = rc.Session(ctx)
	check("rest session after logout", err)
	expect("rest session ended", s == nil, "%+v", s)

	bySoap := rest.NewClient(c.Client)
	check("rest login with the soap session", bySoap.Login(ctx, nil))
	s, err = bySoap.Session(ctx)
	check("rest session from soap", err)
	expect("rest session from soap", s != nil && s.User == u.User.Username(), "%+v", s)

	wrong := rest.NewClient(c.Client)
	err = wrong.Login(ctx, url.UserPassword(u.User.Username(), "wrong"))
	expect("rest login with a wrong password", err != nil, "accepted")

	failureDomainTags(ctx, c, bySoap)
	antiAffinityModules(ctx, c, bySoap)
}

// antiAffinityModules does what CAPV does for a control plane: a cluster module for the
// cluster, its machines' VMs added, listed, one removed, the module deleted.
func antiAffinityModules(ctx context.Context, c *govmomi.Client, rc *rest.Client) {
	m := cluster.NewManager(rc)
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("modules datacenter", err)
	finder.SetDatacenter(dc)
	cl, err := finder.ClusterComputeResource(ctx, "DC0_C0")
	check("modules cluster", err)
	vm0, err := finder.VirtualMachine(ctx, "DC0_C0_RP0_VM0")
	check("modules vm0", err)
	vm1, err := finder.VirtualMachine(ctx, "DC0_C0_RP0_VM1")
	check("modules vm1", err)

	id, err := m.CreateModule(ctx, cl)
	check("create module", err)
	added, err := m.AddModuleMembers(ctx, id, vm0, vm1)
	check("add members", err)
	again, err := m.AddModuleMembers(ctx, id, vm0)
	check("add a member again", err)
	expect("members added once", added && !again, "added %v, again %v", added, again)
	members, err := m.ListModuleMembers(ctx, id)
	check("list members", err)
	expect("module members", len(members) == 2, "%v", members)
	removed, err := m.RemoveModuleMembers(ctx, id, vm1)
	check("remove member", err)
	members, err = m.ListModuleMembers(ctx, id)
	check("list members after removal", err)
	expect("member removed", removed && len(members) == 1 && members[0] == vm0.Reference(), "%v", members)
	modules, err := m.ListModules(ctx)
	check("list modules", err)
	expect("module listed", len(modules) == 1 && modules[0].Module == id && modules[0].Cluster == cl.Reference().Value, "%+v", modules)
	check("delete module", m.DeleteModule(ctx, id))
	_, err = m.ListModuleMembers(ctx, id)
	expect("module deleted", err != nil, "members of a deleted module listed")
}

// failureDomainTags tags a datacenter and a cluster as CAPV's failure domains read them
// (k8s-region / k8s-zone categories), then reads the tags back as CAPV does.
func failureDomainTags(ctx context.Context, c *govmomi.Client, rc *rest.Client) {
	m := tags.NewManager(rc)
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	check("tags datacenter", err)
	finder.SetDatacenter(dc)
	cluster, err := finder.ClusterComputeResource(ctx, "DC0_C0")
	check("tags cluster", err)

	region, err := m.CreateCategory(ctx, &tags.Category{Name: "k8s-region", Cardinality: "SINGLE", AssociableTypes: []string{"Datacenter"}})
	check("create region category", err)
	_, err = m.CreateCategory(ctx, &tags.Category{Name: "k8s-zone", Cardinality: "SINGLE", AssociableTypes: []string{"ClusterComputeResource"}})
	check("create zone category", err)
	_, err = m.CreateCategory(ctx, &tags.Category{Name: "k8s-region", Cardinality: "SINGLE"})
	expect("duplicate category refused", err != nil, "accepted")
	east, err := m.CreateTag(ctx, &tags.Tag{Name: "us-east", CategoryID: "k8s-region"})
	check("create region tag", err)
	west, err := m.CreateTag(ctx, &tags.Tag{Name: "us-west", CategoryID: region})
	check("create second region tag", err)
	zone, err := m.CreateTag(ctx, &tags.Tag{Name: "us-east-1a", CategoryID: "k8s-zone"})
	check("create zone tag", err)

	check("attach region", m.AttachTag(ctx, east, dc))
	check("attach zone", m.AttachTag(ctx, zone, cluster))
	expect("single cardinality", m.AttachTag(ctx, west, dc) != nil, "a second region tag was attached")
	expect("associable types", m.AttachTag(ctx, zone, dc) != nil, "a zone tag was attached to a datacenter")

	attached, err := m.GetAttachedTags(ctx, dc)
	check("attached tags", err)
	expect("datacenter region", len(attached) == 1 && attached[0].Name == "us-east" && attached[0].CategoryID == region, "%+v", attached)
	objects, err := m.ListAttachedObjects(ctx, zone)
	check("attached objects", err)
	expect("zone objects", len(objects) == 1 && objects[0].Reference() == cluster.Reference(), "%+v", objects)
	onObjects, err := m.GetAttachedTagsOnObjects(ctx, []mo.Reference{dc, cluster})
	check("tags on objects", err)
	expect("tags on objects", len(onObjects) == 2 && len(onObjects[1].Tags) == 1 && onObjects[1].Tags[0].Name == "us-east-1a", "%+v", onObjects)

	check("detach region", m.DetachTag(ctx, east, dc))
	check("attach other region", m.AttachTag(ctx, west, dc))
	cat, err := m.GetCategory(ctx, "k8s-zone")
	check("get zone category", err)
	check("delete zone category", m.DeleteCategory(ctx, cat))
	_, err = m.GetTag(ctx, zone)
	expect("category deletion takes its tags", err != nil, "zone tag still there")
}

// taskError is what govmomi's task package returns for a task that ended in error.
type taskError interface {
	Fault() types.BaseMethodFault
}
