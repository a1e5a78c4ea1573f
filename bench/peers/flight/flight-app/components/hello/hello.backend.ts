// The backend compare's flight-node runtime serves: a component backend in the form the real Flight 2.0.2
// discovers (`**/*.backend.ts` under the app folder; the default export is a Koa router's middleware), the
// route the hello workloads load. Flight mounts it with `router.use(...)` in front of its production
// middleware, so like every Flight backend route it bypasses compression, rate limit and cache.
import Router from "@koa/router";

const router = new Router();

router.get("/api/hello", async (ctx) => {
  ctx.body = { message: "Hello from Flight!" };
});

export default router.routes();
