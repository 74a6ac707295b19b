// The intake benchmark's reference receiver: a Probot app that does nothing with the delivery. Probot still
// verifies the signature, parses the payload and runs the (empty) handler before it answers.
module.exports = (app) => {
  app.on("pull_request.opened", async () => {});
};
