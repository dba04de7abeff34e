// Command vcsim-baseline serves govmomi's own vCenter simulator (Debian's
// golang-github-vmware-govmomi-dev: the simulator and vapi/simulator packages) over TLS on
// loopback, with the same model flags as `infrasim vcsim`, so `infrasim bench vsphere` can
// measure both side by side. It is the baseline of a benchmark, not a product: it prints the
// SDK URL once serving and runs until killed.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator" // the REST endpoints, as govc's vcsim serves them
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	username := flag.String("username", "administrator@vsphere.local", "the one user name accepted")
	password := flag.String("password", "", "the one password accepted")
	dc := flag.Int("datacenters", 1, "datacenters")
	clusters := flag.Int("clusters", 1, "clusters per datacenter")
	hosts := flag.Int("hosts", 3, "hosts per cluster")
	standalone := flag.Int("standalone-hosts", 1, "standalone hosts per datacenter")
	vms := flag.Int("vms", 2, "VMs per standalone host and per resource pool")
	datastores := flag.Int("datastores", 1, "datastores")
	pools := flag.Int("pools", 0, "extra resource pools per cluster")
	portgroups := flag.Int("portgroups", 1, "distributed port groups per datacenter")
	folders := flag.Int("folders", 0, "datacenters placed in a folder")
	certFile := flag.String("tls-cert", "", "the serving certificate (PEM); Go's test certificate when empty")
	keyFile := flag.String("tls-key", "", "the key of -tls-cert (PEM)")
	flag.Parse()

	model := simulator.VPX()
	model.Datacenter = *dc
	model.Cluster = *clusters
	model.ClusterHost = *hosts
	model.Host = *standalone
	model.Machine = *vms
	model.Datastore = *datastores
	model.Pool = *pools
	model.Portgroup = *portgroups
	model.Folder = *folders
	if err := model.Create(); err != nil {
		fmt.Fprintln(os.Stderr, "creating the model:", err)
		os.Exit(1)
	}
	defer model.Remove()

	model.Service.Listen = &url.URL{Host: *listen, User: url.UserPassword(*username, *password)}
	model.Service.TLS = new(tls.Config)
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loading the certificate:", err)
			os.Exit(1)
		}
		model.Service.TLS.Certificates = []tls.Certificate{cert}
	}
	model.Service.RegisterEndpoints = true
	server := model.Service.NewServer()
	defer server.Close()

	fmt.Printf("serving %s\n", server.URL.String())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}
