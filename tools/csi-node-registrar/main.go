// csi-node-registrar registers a CSI node plugin with the kubelet: it serves the kubelet's
// plugin registration API on <plugin-registration-path>/<driver>-reg.sock, where the
// kubelet's plugin watcher finds it, and tells the kubelet where the plugin's CSI socket is.
//
// It takes node-driver-registrar's flags and runs in its place: the Go module proxy this
// project builds from refuses github.com/kubernetes-csi/node-driver-registrar. It is written
// in Go because the kubelet's registration client sends the socket path as the HTTP/2
// :authority, which the Rust gRPC stack (h2) rejects as malformed; grpc-go accepts it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var (
	csiAddress   = flag.String("csi-address", "/csi/csi.sock", "the plugin's CSI socket inside this container")
	kubeletPath  = flag.String("kubelet-registration-path", "", "the same socket's path on the host, which the kubelet dials")
	registryPath = flag.String("plugin-registration-path", "/registration", "the kubelet's plugins_registry directory, as mounted here")
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	driver   string
	endpoint string
	refused  chan string
}

func (r *registrar) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(ctx context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("the kubelet registered %s", r.driver)
	} else {
		select {
		case r.refused <- s.Error:
		default:
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// driverName asks the plugin for its name, waiting for the plugin to come up.
func driverName() string {
	conn, err := grpc.NewClient("unix://"+*csiAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("CSI address %s: %v", *csiAddress, err)
	}
	defer conn.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil && info.GetName() != "" {
			return info.GetName()
		}
		log.Printf("waiting for the CSI plugin at %s: %v", *csiAddress, err)
		time.Sleep(2 * time.Second)
	}
}

func main() {
	flag.Parse()
	if *kubeletPath == "" {
		log.Fatal("--kubelet-registration-path is required")
	}
	driver := driverName()
	socket := filepath.Join(*registryPath, fmt.Sprintf("%s-reg.sock", driver))
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatalf("removing stale %s: %v", socket, err)
	}
	old := syscall.Umask(0o077)
	lis, err := net.Listen("unix", socket)
	syscall.Umask(old)
	if err != nil {
		log.Fatalf("listening on %s: %v", socket, err)
	}
	r := &registrar{driver: driver, endpoint: *kubeletPath, refused: make(chan string, 1)}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	log.Printf("serving plugin registration of %s on %s (plugin socket %s on the host)", driver, socket, *kubeletPath)
	go func() {
		if err := srv.Serve(lis); err != nil {
			log.Fatalf("serving: %v", err)
		}
	}()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	code := 0
	select {
	case <-term:
	case why := <-r.refused:
		// Exiting lets the kubelet restart us, and a restart registers again.
		log.Printf("the kubelet refused to register %s: %s", driver, why)
		code = 1
	}
	srv.GracefulStop()
	os.Remove(socket)
	os.Exit(code)
}
