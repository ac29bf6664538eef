// Merged by @jupyterlab/builder into its webpack configuration (package.json: jupyterlab.webpackConfig).
// Module ids named after paths relative to this folder, not hashes of absolute paths: the
// container entry's id would otherwise depend on where the repository is checked out, and the
// committed build could not be reproduced in another folder (scripts/check-js.sh compares).
module.exports = { optimization: { moduleIds: "named" } };
