// A Netty 4 HTTP server for tests/realservers: GET /bytes/N answers N bytes of the refserver pattern
// (byte i is 'a' + i % 26), keep-alive as the client asks.
//
//     java -cp CLASSES:LIB/* NettyBytes PORT executor|loop
//
// "executor": the handler is added to the pipeline on a DefaultEventExecutorGroup of 4 threads, so every
// request goes from the channel's event loop to an executor thread and its response back (a common
// "don't block the event loop" configuration). "loop": the handler runs on the event loop itself.
// NIO transport (no native epoll jar needed): 1 boss loop accepting, 2 worker loops (the machine's CPUs).

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.DefaultEventExecutorGroup;
import io.netty.util.concurrent.EventExecutorGroup;

import java.net.InetSocketAddress;

public final class NettyBytes {
    static byte[] body(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) ('a' + i % 26);
        return b;
    }

    static final class BytesHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            String uri = req.uri();
            FullHttpResponse res;
            if (uri.startsWith("/bytes/") && uri.substring(7).matches("[0-9]{1,9}")) {
                res = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                        Unpooled.wrappedBuffer(body(Integer.parseInt(uri.substring(7)))));
                res.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/octet-stream");
            } else {
                res = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.NOT_FOUND);
            }
            HttpUtil.setContentLength(res, res.content().readableBytes());
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            HttpUtil.setKeepAlive(res, keepAlive);
            if (keepAlive) {
                ctx.writeAndFlush(res);
            } else {
                ctx.writeAndFlush(res).addListener(ChannelFutureListener.CLOSE);
            }
        }

        // A client resetting its connection (the load generator at its end) is not worth a stack trace.
        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        boolean onExecutor = args[1].equals("executor");
        if (!onExecutor && !args[1].equals("loop")) throw new IllegalArgumentException("executor or loop");
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(2);
        EventExecutorGroup executor = onExecutor ? new DefaultEventExecutorGroup(4) : null;
        try {
            ServerBootstrap b = new ServerBootstrap();
            b.group(boss, workers).channel(NioServerSocketChannel.class)
             .childHandler(new ChannelInitializer<SocketChannel>() {
                 @Override
                 protected void initChannel(SocketChannel ch) {
                     ChannelPipeline p = ch.pipeline();
                     p.addLast(new HttpServerCodec());
                     p.addLast(new HttpObjectAggregator(65536));
                     if (executor != null) p.addLast(executor, "bytes", new BytesHandler());
                     else p.addLast("bytes", new BytesHandler());
                 }
             });
            b.bind(new InetSocketAddress("127.0.0.1", port)).sync().channel().closeFuture().sync();
        } finally {
            boss.shutdownGracefully();
            workers.shutdownGracefully();
            if (executor != null) executor.shutdownGracefully();
        }
    }
}
