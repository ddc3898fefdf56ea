// gRPC-Java (grpc-netty-shaded) over h2c on 127.0.0.1: a unary method "bytes/Get" whose request and response
// are plain bytes (its own marshaller: no protobuf), and a client that keeps a number of calls outstanding
// on each of its channels.
//
//   java GrpcBytes server PORT executor|direct [RESPONSE_BYTES]
//       the handler on grpc's default executor (a cached thread pool: each call handed to a worker) or on
//       the event loop (directExecutor); prints "listening PORT" once bound.
//   java GrpcBytes client PORT CHANNELS OUTSTANDING SECONDS
//       CHANNELS channels (a connection each), OUTSTANDING calls in flight on each for SECONDS, then waits
//       for the calls in flight and prints {"calls": completed, "errors": failed}.
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

public final class GrpcBytes {
    static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        public byte[] parse(InputStream in) {
            try {
                return in.readAllBytes();
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }
    }

    static final MethodDescriptor<byte[], byte[]> GET = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName("bytes/Get")
            .setRequestMarshaller(new Bytes())
            .setResponseMarshaller(new Bytes())
            .build();

    public static void main(String[] args) throws Exception {
        if (args[0].equals("server"))
            server(Integer.parseInt(args[1]), args[2].equals("direct"), args.length > 3 ? Integer.parseInt(args[3]) : 100);
        else
            client(Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                   Double.parseDouble(args[4]));
    }

    static void server(int port, boolean direct, int size) throws Exception {
        byte[] response = new byte[size];
        ServerServiceDefinition service = ServerServiceDefinition.builder("bytes")
                .addMethod(GET, ServerCalls.asyncUnaryCall((byte[] request, StreamObserver<byte[]> out) -> {
                    out.onNext(response);
                    out.onCompleted();
                }))
                .build();
        NettyServerBuilder builder = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
                .addService(service);
        if (direct)
            builder.directExecutor();
        Server server = builder.build().start();
        System.out.println("listening " + server.getPort());
        System.out.flush();
        server.awaitTermination();
    }

    static void client(int port, int channels, int outstanding, double seconds) throws Exception {
        AtomicLong calls = new AtomicLong(), errors = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(channels * outstanding);
        List<ManagedChannel> opened = new ArrayList<>();
        byte[] request = new byte[20];

        for (int c = 0; c < channels; c++) {
            ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext()
                    .directExecutor().build();
            opened.add(channel);
            for (int i = 0; i < outstanding; i++)
                new Object() {
                    void call() {
                        ClientCalls.asyncUnaryCall(channel.newCall(GET, CallOptions.DEFAULT), request,
                                new StreamObserver<byte[]>() {
                                    public void onNext(byte[] value) {
                                    }

                                    public void onError(Throwable t) {
                                        errors.incrementAndGet();
                                        done.countDown();
                                    }

                                    public void onCompleted() {
                                        calls.incrementAndGet();
                                        if (stop.get())
                                            done.countDown();
                                        else
                                            call();
                                    }
                                });
                    }
                }.call();
        }
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        if (!done.await(30, TimeUnit.SECONDS))
            errors.addAndGet(done.getCount());
        for (ManagedChannel channel : opened)
            channel.shutdown();
        for (ManagedChannel channel : opened)
            channel.awaitTermination(10, TimeUnit.SECONDS);
        System.out.println("{\"calls\": " + calls.get() + ", \"errors\": " + errors.get() + "}");
        System.out.flush();
        System.exit(0);
    }
}
