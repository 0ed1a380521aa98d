# hold VAL_FRACTION of the training images out of training, chosen by SEED
order = np.random.default_rng(SEED).permutation(len(trainset))
n_val = round(len(trainset) * VAL_FRACTION)
valset = torch.utils.data.Subset(trainset, np.sort(order[:n_val]).tolist())
trainset = torch.utils.data.Subset(trainset, np.sort(order[n_val:]).tolist())
trainloader = torch.utils.data.DataLoader(trainset, batch_size=4, shuffle=True)

for epoch in range(EPOCHS):
    ...  # the tutorial's training loop over trainloader
    net.eval()
    with torch.no_grad():   # the validation images: checked, never learned from
        val_loss = sum(criterion(net(x), y).item() * len(y) for x, y in
                       torch.utils.data.DataLoader(valset, batch_size=1000)) / len(valset)
    net.train()
    print(f'[{epoch + 1}] validation loss: {val_loss:.3f}')
